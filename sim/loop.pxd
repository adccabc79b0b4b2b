# The compiled scheduler loop (sim/loop.py): Cython's augmenting .pxd, the .py stays plain
# Python. Most locals stay Python objects (token counts add as Python integers, times as
# doubles, exactly as the interpreter does); a mixed step's price (_step_s) runs in C types:
# token counts as 64-bit integers, which step_model.step_constants' caps keep every product
# of below 2^63 (so exact, as Python's integers are), each rounded to a double where Python
# rounds it, and the seconds as doubles.
import cython
# the engine's fields and methods in C, and the writers of its columns (engine.pxd)
from ._engine_c cimport Engine, _push_double, _push_int, _typed_columns
from ._seq_c cimport Seq  # a request's fields in C (seq.pxd)
from ._seq_c cimport prefill_pairs  # in C: its one definition, compiled (seq.pxd)

@cython.locals(dense=cython.longlong, moe=cython.longlong, gemm_rate=cython.double,
               moe_rate=cython.double, pair=cython.longlong, attn_rate=cython.double,
               weights=cython.double, kvb=cython.longlong, state=cython.longlong,
               bw=cython.double, overhead=cython.double, eager=cython.double,
               graph_max=cython.longlong, prefill_eager=cython.bint, cpu_step=cython.double,
               cpu_seq=cython.double, overlap=cython.bint, collectives=cython.bint,
               token_cap=cython.longlong, pair_cap=cython.longlong, kv_cap=cython.longlong,
               seq_cap=cython.longlong, tokens=cython.longlong, seqs=cython.longlong,
               attended=cython.longlong, held=cython.longlong, gemm=cython.double,
               attention=cython.double, kv=cython.longlong, memory=cython.double,
               collective=cython.double, cpu=cython.double, compute=cython.double,
               gpu=cython.double)
cpdef double _step_s(object eng, tuple k, long long prefill, long long num_decode,
                     long long pairs, long long context, long long cached) except? -1.0

@cython.locals(num_decode=cython.longlong, context=cython.longlong, prefill=cython.longlong,
               cached=cython.longlong, pairs=cython.longlong, dt=cython.double, seq=Seq,
               chunk=cython.longlong, start=cython.double)
cdef _iterate(Engine eng, list work, bint decode)

@cython.locals(live=cython.longlong, seq=Seq, waiting=cython.longlong)
cdef _account(Engine eng, double dt)

@cython.locals(j=cython.longlong, seq=Seq)
cdef _finish_decode_step(Engine eng)

cdef _finish_chunk(Engine eng, Seq seq, long long chunk, double start)

@cython.locals(seqs=list, nxt=cython.longlong, head=Seq, left=cython.longlong,
               steps=cython.longlong, until=cython.double, holds_back=cython.bint)
cpdef run_iterations(Engine eng, object horizon)
cdef _decode_only(Engine eng, bint holds_back)
cdef _stuck(Engine eng)
