# The engine as a C struct (sim/engine.py compiled as servecap.sim._engine_c): its counters,
# clock and tables are fields the compiled kernels (loop.pxd, decode_run.pxd) cimport and read
# directly, and its request bookkeeping methods take a request as the compiled Seq (seq.pxd)
# and are called in C by the kernels and by each other. Counts are 64-bit integers (Python's
# integers, far below 2^63), the clock and seconds doubles (Python's floats, the same bits).
import cython

from ._kvpool_c cimport BlockPool as CPool
from ._seq_c cimport Seq as CSeq


cdef class Engine:
    cdef public CPool pool
    cdef public object coef, cfg, host, waiting, jitter, price, dense, step_shared, \
        step_per_n, step_k, result
    cdef public list seqs, prefilling, residue
    cdef public dict running, decoding, finish_at, step_known
    cdef public object ends, sample_times, sample_tokens, sample_blocks
    cdef public long long bsz, next_arrival, owed, j0_sum, ctx_base, dec_idx, \
        reserved_blocks, steps_since_prefill, group_steps, next_closed, num_iterations
    cdef public double now, extra_s, frontend_free, busy_s, queue_area, system_area, \
        intake_window, batch_open, batch_from
    cdef public object speculation
    cdef public long long state_blocks, max_num_seqs, max_num_batched_tokens, \
        max_waiting_steps, num_scheduler_steps, intake_batch
    cdef public list batch_seqs
    cdef public bint by_priority, closed, prefix_caching

    cpdef send_next(self)
    @cython.locals(seq=CSeq)
    cpdef pull_arrivals(self)
    cpdef idle(self)
    cpdef jump_to_next_arrival(self)
    cpdef through_frontend(self, CSeq seq)
    @cython.locals(member=CSeq)
    cpdef through_batch(self, CSeq seq)
    cpdef prefix_hit_blocks(self, CSeq seq)
    cpdef prefill_need(self, CSeq seq)
    cpdef try_admit(self, CSeq seq)
    cpdef _share_prefix(self, CSeq seq, object hit)
    cpdef publish_prefix(self, CSeq seq)
    cpdef _swap_in(self, CSeq seq, object blocks)
    @cython.locals(j0=cython.longlong, last=cython.longlong)
    cpdef start_decoding(self, CSeq seq)
    @cython.locals(steps=cython.longlong)
    cpdef _stop_decoding(self, CSeq seq, long long last)
    cpdef live_kv_tokens(self)
    cpdef release(self, CSeq seq, object num_blocks)
    cpdef held_blocks(self, CSeq seq, object held_tokens)
    cpdef finish(self, CSeq seq, object held_tokens)
    cpdef preempt(self, CSeq seq)
    cpdef swap_in_waiting(self)
    cpdef mid_group(self)
    cpdef reserve_decode(self)
    cpdef make_room_for_decode(self)


cpdef owed(CSeq seq)
