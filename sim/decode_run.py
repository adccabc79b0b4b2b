"""Decode-only iterations between two events, the simulator's hot loop: the source of the
compiled kernel (Cython, built by the package's build as servecap.sim._decode_run_c with the
types in decode_run.pxd) and, where that is absent or was built from another source, the same
code run by the interpreter (sim/core.py picks). Between two events (an arrival, a finish, a
preemption, decode-priority's prefill coming due) the step time is a known function of the
batch, base + n x index tokens of context, so the steps run here without the scheduler."""

from types import FunctionType

from .policies import decode_due
from .speculative import decode_iteration_s
from .step_model import decode_eager_s, measured_collective_s

INF = float("inf")


def _as_python() -> None:
    """A Python function where this source runs as Python; Cython's own where compiled."""


# compiled, the columns' samples are written into their arrays' memory by the helpers
# engine.pxd defines (_push_double, _push_int: what array.append stores, without a
# method call and a Python number per sample) where _typed_columns finds the arrays they
# expect; as Python, by array.append
COMPILED = not isinstance(_as_python, FunctionType)


def decode_run(eng, horizon, max_steps):
    """Decode-only iterations: the hot path, with the bookkeeping of _iterate, _account and
    _finish_decode_step inlined (the clock, decode index and free blocks kept in locals and
    written back before anything else reads them), until the next arrival, an empty decode
    set, max_steps, a preemption, or (with prompts waiting) decode-priority's prefill coming
    due. A dense model's step price is decode_pricer's arithmetic, inlined. Returns the
    iterations run."""
    pool, residue, bsz = eng.pool, eng.residue, eng.bsz
    # the result's timeline and KV sample columns (a KvSamples' columns, sim/state.py)
    ends, times, tokens, blocks = eng.ends, eng.sample_times, eng.sample_tokens, \
        eng.sample_blocks
    typed = COMPILED and _typed_columns(times, tokens, blocks, ends)  # noqa: F821
    if not typed:
        end_append, time_append = ends.append, times.append
        tokens_append, blocks_append = tokens.append, blocks.append
    finish_at, decoding = eng.finish_at, eng.decoding
    # finish_at's keys as set bytes (Engine.start_decoding sets them; no sequence joins
    # the decode set during this run, so they cover every key it meets)
    flags = eng.finish_flags
    num_flags = len(flags)
    seqs, nxt = eng.seqs, eng.next_arrival
    next_arrival = INF
    if nxt < len(seqs):
        head = seqs[nxt]  # a typed local: its field read in C where compiled
        next_arrival = head.ready_s
    stop = min(next_arrival, horizon if horizon is not None else INF)
    num_waiting, limit = len(eng.waiting), max_steps or 0
    jitter, total_blocks, dense = eng.jitter, pool.num_blocks, eng.dense
    busy = segment = system_area = 0.0
    now, j, free, base, n = eng.now, eng.dec_idx, pool.free, eng.ctx_base, len(decoding)
    last_step = j + limit if max_steps is not None else INF
    price, gn, lk, per = pricing(eng, n)
    a = bw = fixed = 0.0
    pair, attn_rate, kvg, bwg, overlap, pp = eng.step_shared
    gemm = wts = st = coll = over = eag = cpu = hops = 0.0
    if per is not None:
        gemm, wts, st, coll, over, eag, cpu, hops = per
    wb = kvb = wbi = kvbi = 0
    if dense is not None:
        _, a, wb, kvb, bw, _, fixed = dense
    exact = type(wb) is int and type(kvb) is int  # byte counts as C integers when compiled
    if exact:
        wbi, kvbi = wb, kvb
    start = j
    while n and now < stop and j < last_step:
        need = residue[j % bsz]
        if need > free:
            eng.now, eng.dec_idx, pool.free = now, j, free
            eng.make_room_for_decode()
            system_area += (n + num_waiting) * segment
            busy, segment = busy + segment, 0.0
            free, base, n = pool.free, eng.ctx_base, len(decoding)
            if len(eng.waiting) != num_waiting:
                break
            price, gn, lk, per = pricing(eng, n)
            if per is not None:
                gemm, wts, st, coll, over, eag, cpu, hops = per
            need = residue[j % bsz]
        live = base + n * j
        if per is not None:  # decode_step_price, inlined
            compute = pair * live / attn_rate
            kv = kvg * (live + n)
            kv += st
            memory = (wts + kv) / bwg
            compute = gemm + compute
            dt = (compute if compute > memory else memory) + coll + over + eag
            if overlap:
                dt = dt if dt > cpu else cpu
            else:
                dt = dt + cpu
            if pp != 1:
                dt = pp * dt + hops
        elif price is None:
            compute = gn + a * live
            if exact:
                memory = (wbi + kvbi * (live + n)) / bw
            else:
                memory = (wb + kvb * (live + n)) / bw
            dt = (compute if compute > memory else memory) + lk + fixed
        else:
            dt = price(n, live)
        if jitter is not None:
            dt *= jitter()
        segment += dt
        if typed:
            _push_double(times, now)  # noqa: F821 (engine.pxd)
            _push_int(tokens, live)  # noqa: F821
            _push_int(blocks, total_blocks - free)  # noqa: F821
            now += dt
            _push_double(ends, now)  # noqa: F821
        else:
            time_append(now)
            tokens_append(live)
            blocks_append(total_blocks - free)
            now += dt
            end_append(now)
        free -= need
        j += 1
        if j - 1 < num_flags and flags[j - 1]:
            eng.now, eng.dec_idx, pool.free = now, j, free
            for seq in finish_at.pop(j - 1):
                if seq.request_id in decoding and seq.j0 + seq.output_tokens \
                        - seq.generated - 1 == j - 1:
                    eng.finish(seq, eng._stop_decoding(seq, j - 1))
            system_area += (n + num_waiting) * segment
            busy, segment = busy + segment, 0.0
            free, base, n = pool.free, eng.ctx_base, len(decoding)
            if num_waiting and decode_due(eng) or eng.closed:
                break
            price, gn, lk, per = pricing(eng, n)
            if per is not None:
                gemm, wts, st, coll, over, eag, cpu, hops = per
    system_area += (n + num_waiting) * segment
    busy += segment
    eng.now, eng.dec_idx, pool.free = now, j, free
    eng.num_iterations += j - start
    eng.busy_s += busy
    eng.queue_area += num_waiting * busy
    eng.system_area += system_area
    return j - start


def pricing(eng, n):
    """How decode_run prices a step of n sequences: (None, gemm s for n tokens, link s for n
    tokens, None) to inline a dense model's arithmetic; (None, 0, 0, the per-n terms of
    step_model.decode_step_constants) to inline decode_step_price; else (a price function,
    0, 0, None)."""
    spec = eng.speculation
    if spec is not None and spec.applies(n):
        return (lambda num, live: decode_iteration_s(eng.coef, spec, num, live)), 0.0, 0.0, \
            None
    if eng.dense is None:
        per = eng.step_known.get(n)
        if per is None:
            per = eng.step_known[n] = eng.step_per_n(n)
        return None, 0.0, 0.0, per
    return None, eng.dense[0] * n, eng.dense[5] * n + decode_eager_s(eng.coef, n) \
        + measured_collective_s(eng.coef, n), None
