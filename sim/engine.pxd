# The engine as a C struct (sim/engine.py compiled as servecap.sim._engine_c): its counters,
# clock and tables are fields the compiled kernels (loop.pxd, decode_run.pxd) cimport and read
# directly, and its request bookkeeping methods take a request as the compiled Seq (seq.pxd)
# and are called in C by the kernels and by each other. Counts are 64-bit integers (Python's
# integers, far below 2^63), the clock and seconds doubles (Python's floats, the same bits).
import cython
from cpython.array cimport array, resize_smart
from cpython.object cimport Py_SIZE

from ._kvpool_c cimport BlockPool as CPool
from ._seq_c cimport Seq as CSeq


# The engine's timeline and KV sample columns (ends, sample_times, sample_tokens,
# sample_blocks) written in C by the compiled kernels (decode_run.pxd, loop.pxd), which
# run only with this compiled engine
cdef inline bint _column(object column, char code) noexcept:
    return type(column) is array and (<array>column).ob_descr.typecode == code


cdef inline bint _typed_columns(object times, object tokens, object blocks,
                                object ends) noexcept:
    """Whether the columns are the arrays _push_double and _push_int write: C doubles
    (times, ends: "d") and 64-bit integers (tokens, blocks: "q")."""
    return _column(times, c'd') and _column(tokens, c'q') and _column(blocks, c'q') \
        and _column(ends, c'd')


cdef inline int _push_double(object column, double value) except -1:
    """column.append(value) for an array("d") (its caller checks _typed_columns first): the
    array one item longer (resize_smart, as extend_buffer grows it) and the value stored
    into that item, without extend_buffer's memcpy call."""
    cdef Py_ssize_t size = Py_SIZE(column)
    resize_smart(<array>column, size + 1)
    (<array>column).data.as_doubles[size] = value
    return 0


cdef inline int _push_int(object column, long long value) except -1:
    """column.append(value) for an array("q") (its caller checks _typed_columns first)."""
    cdef Py_ssize_t size = Py_SIZE(column)
    resize_smart(<array>column, size + 1)
    (<array>column).data.as_longlongs[size] = value
    return 0


cdef class Engine:
    cdef public CPool pool
    cdef public object coef, cfg, host, waiting, jitter, price, dense, step_shared, \
        step_per_n, step_k, result, too_long
    cdef public list seqs, prefilling, residue
    cdef public bytearray finish_flags
    cdef public dict running, decoding, finish_at, step_known, block_counts
    cdef public object ends, sample_times, sample_tokens, sample_blocks
    cdef public long long bsz, next_arrival, owed, j0_sum, ctx_base, dec_idx, \
        reserved_blocks, steps_since_prefill, group_steps, next_closed, num_iterations
    cdef public double now, extra_s, frontend_free, busy_s, queue_area, system_area, \
        intake_window, batch_open, batch_from, frontend_s, frontend_latency_s
    cdef public object speculation
    cdef public long long state_blocks, max_num_seqs, max_num_batched_tokens, \
        max_waiting_steps, num_scheduler_steps, intake_batch
    cdef public list batch_seqs
    cdef public bint by_priority, closed, prefix_caching

    cpdef send_next(self)
    @cython.locals(seq=CSeq, need=cython.longlong, limit=cython.longlong)
    cpdef pull_arrivals(self)
    cpdef bint idle(self) except -1
    @cython.locals(head=CSeq)
    cpdef bint jump_to_next_arrival(self) except -1
    cpdef through_frontend(self, CSeq seq)
    @cython.locals(member=CSeq)
    cpdef through_batch(self, CSeq seq)
    cpdef long long prefix_hit_blocks(self, CSeq seq) except? -1
    cpdef long long prefill_need(self, CSeq seq) except? -1
    @cython.locals(hit=cython.longlong, reload=cython.bint, tokens=cython.longlong,
                   blocks=cython.longlong, need=cython.longlong, taken=cython.longlong,
                   spare=cython.longlong)
    cpdef bint try_admit(self, CSeq seq) except -1
    cpdef _share_prefix(self, CSeq seq, long long hit, long long blocks)
    cpdef publish_prefix(self, CSeq seq)
    cpdef _swap_in(self, CSeq seq, long long blocks)
    @cython.locals(j0=cython.longlong, last=cython.longlong, flags=bytearray)
    cpdef start_decoding(self, CSeq seq)
    @cython.locals(steps=cython.longlong)
    cpdef long long _stop_decoding(self, CSeq seq, long long last) except? -1
    cpdef long long live_kv_tokens(self) except? -1
    cpdef release(self, CSeq seq, long long num_blocks)
    cpdef long long held_blocks(self, CSeq seq, long long held_tokens) except? -1
    cpdef long long blocks(self, long long num_tokens) except? -1
    cpdef finish(self, CSeq seq, long long held_tokens)
    cpdef preempt(self, CSeq seq)
    cpdef swap_in_waiting(self)
    cpdef long long mid_group(self) except? -1
    cpdef reserve_decode(self)
    cpdef make_room_for_decode(self)


cpdef long long owed(CSeq seq) except? -1
