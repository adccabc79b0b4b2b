# A request's state as a C struct (sim/seq.py compiled as servecap.sim._seq_c): the compiled
# kernels (loop.pxd, decode_run.pxd) cimport it and read and write its fields directly, not
# through a slot descriptor each. Token counts are 64-bit integers (Python's integers, far
# below 2^63), times doubles (Python's floats, the same bits); the times a request may not
# have reached (None) and the lists stay objects. As Python, every field reads the same.
import cython


cdef class Seq:
    cdef readonly object _req  # the property req sets it and the five below
    cdef readonly long long request_id, prompt_tokens, output_tokens, prefix_tokens
    cdef readonly object prefix_group
    cdef public object state, reason, admitted_s, prefill_start_s, prefill_end_s, \
        release_s
    cdef public list prefill_token_s, segments, extra_gaps_s
    cdef public long long generated, target, computed, private_blocks, prefix_blocks, j0, \
        preemptions, recomputed_tokens, chunks, prefix_hit_tokens, swapped_tokens, \
        offload_hit_tokens
    cdef public double prev_s, last_token_s, ready_s
    cdef public bint kv_transferred


# a prefill chunk's (query, key) pairs in 64-bit integers (a chunk's tokens times the
# context's: a prompt's length squared at most, far below 2^63), called in C by the
# compiled loop (loop.pxd)
cpdef long long prefill_pairs(long long computed, long long chunk) except? -1


@cython.locals(n=cython.Py_ssize_t, i=cython.Py_ssize_t, seq=Seq,
               arrival=cython.double[:], admitted=cython.double[:], first=cython.double[:],
               last=cython.double[:], release=cython.double[:], states=cython.longlong[:],
               prompt=cython.longlong[:], output=cython.longlong[:],
               prefix=cython.longlong[:], hit=cython.longlong[:], offload=cython.longlong[:],
               preempt=cython.longlong[:], recomputed=cython.longlong[:],
               chunks=cython.longlong[:])
cpdef tuple request_columns(list seqs)


@cython.locals(n=cython.Py_ssize_t, i=cython.Py_ssize_t, k=cython.longlong,
               s=cython.Py_ssize_t, e=cython.Py_ssize_t, num_segments=cython.Py_ssize_t,
               num_extras=cython.Py_ssize_t, seq=Seq, segment=tuple, last=cython.longlong,
               keys=cython.longlong[:],
               seg_line=cython.longlong[:], firsts=cython.longlong[:],
               lasts=cython.longlong[:], prevs=cython.double[:],
               extra_line=cython.longlong[:], extras=cython.double[:], index=dict,
               lines=list)
cpdef tuple segment_columns(list seqs, dict timelines)
