# The policies compiled (sim/policies.py as servecap.sim._policies_c): they read the engine's
# queues and counters and a waiting request's tokens as C fields (engine.pxd, seq.pxd) and
# call its admission in C. Budgets are token counts, 64-bit integers (far below 2^63).
import cython

from ._engine_c cimport Engine as CEngine
from ._seq_c cimport Seq as CSeq


@cython.locals(seq=CSeq, chunk=cython.longlong, work=list)
cdef list _admit(CEngine eng, long long budget, bint allow_oversize, bint chunked=*)
@cython.locals(budget=cython.longlong)
cpdef tuple _continuous(CEngine eng)
cpdef tuple _prefill_priority(CEngine eng)
cpdef bint decode_due(CEngine eng) except -1
cpdef tuple _decode_priority(CEngine eng)
@cython.locals(seq=CSeq, chunk=cython.longlong, budget=cython.longlong, work=list)
cpdef tuple _chunked_prefill(CEngine eng)
