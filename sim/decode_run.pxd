# The C types of sim/decode_run.py's locals, for the compiled kernel (Cython's augmenting
# .pxd: the .py stays plain Python). Integers are token, block and step counts (64-bit);
# wbi and kvbi hold the byte counts when they are ints, so (wbi + kvbi x tokens) is exact,
# as Python's integers are, below 2^63, and is rounded to a double once, as Python rounds it.
import cython

from ._kvpool_c cimport BlockPool
# the engine's fields and methods in C, and the writers of its columns (engine.pxd)
from ._engine_c cimport Engine, _push_double, _push_int, _typed_columns
from ._seq_c cimport Seq  # a request's fields in C (seq.pxd)


@cython.locals(n=cython.longlong, j=cython.longlong, free=cython.longlong,
               base=cython.longlong, num_waiting=cython.longlong, need=cython.longlong,
               live=cython.longlong, total_blocks=cython.longlong, start=cython.longlong,
               limit=cython.longlong, bsz=cython.longlong, nxt=cython.longlong,
               wbi=cython.longlong, kvbi=cython.longlong, exact=cython.bint,
               now=cython.double, stop=cython.double, next_arrival=cython.double,
               last_step=cython.double, busy=cython.double, segment=cython.double,
               system_area=cython.double, dt=cython.double, compute=cython.double,
               memory=cython.double, a=cython.double, bw=cython.double,
               fixed=cython.double, gn=cython.double, lk=cython.double,
               pair=cython.double, attn_rate=cython.double, kvg=cython.double,
               bwg=cython.double, overlap=cython.bint, pp=cython.longlong,
               gemm=cython.double, wts=cython.double, st=cython.double,
               coll=cython.double, over=cython.double, eag=cython.double,
               cpu=cython.double, hops=cython.double, kv=cython.double,
               residue=list, finish_at=dict, decoding=dict, typed=cython.bint, seq=Seq,
               pool=BlockPool, flags=bytearray, num_flags=cython.longlong, seqs=list, head=Seq)
cpdef long long decode_run(Engine eng, object horizon, object max_steps) except? -1


# how a step of n sequences is priced, in C: called at the run's start and after each event
@cython.locals(per=tuple)
cdef tuple pricing(Engine eng, long long n)
