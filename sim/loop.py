"""The scheduler loop between the engine's events: each pass pulls arrivals, lets the policy
pick an iteration's work (or hands a run of decode-only steps to the decode kernel), prices
the forward pass and books its finishes. The source of the compiled loop (Cython, built by
the package's build as servecap.sim._loop_c with the types in loop.pxd) and, where that is
absent or was built from another source, the same code run by the interpreter (sim/core.py
picks)."""

from types import FunctionType

from . import core
from .engine import owed
from .policies import decode_due
from .speculative import decode_iteration_s
from .state import REJECTED
from .step_model import collective_s, prefill_pairs, step_s


def _as_python() -> None:
    """A Python function where this source runs as Python; Cython's own where compiled."""


# compiled, an iteration's samples are written into the columns' memory by engine.pxd's
# _push_double and _push_int where _typed_columns finds the arrays they expect (as
# decode_run writes its steps'); as Python, by array.append
COMPILED = not isinstance(_as_python, FunctionType)
INF = float("inf")


def run_iterations(eng, horizon):
    """Run the iterations that start before horizon (None: until every request is done)."""
    plan = core.PLANNERS[eng.cfg.policy]  # compiled where the build made them
    decode_run = (core.COMPILED or core.PYTHON).decode_run  # likewise
    until = INF if horizon is None else horizon  # a C double where compiled
    holds_back = eng.cfg.policy == "decode-priority"  # may waiting prompts be held back
    while eng.now < until:
        seqs, nxt = eng.seqs, eng.next_arrival
        if nxt < len(seqs):  # pull_arrivals' own test
            head = seqs[nxt]
            if head.ready_s <= eng.now:
                eng.pull_arrivals()
        if eng.idle():
            if not eng.jump_to_next_arrival():
                return
            continue
        left = eng.mid_group() if eng.waiting else 0
        if eng.decoding and not eng.prefilling and not eng.extra_s \
                and (left or _decode_only(eng, holds_back)):
            steps = decode_run(eng, horizon, left or (
                eng.max_waiting_steps - eng.steps_since_prefill if eng.waiting else None))
            eng.steps_since_prefill += steps if eng.waiting else 0
            eng.group_steps += steps
            continue
        eng.swap_in_waiting()
        work, decode = plan(eng)
        if not work and not (decode and eng.decoding) and not eng.extra_s:
            _stuck(eng)
            continue
        _iterate(eng, work, decode and bool(eng.decoding))


def _iterate(eng, work, decode):
    """One forward pass: the decode set steps (if chosen) and each prefill chunk computes."""
    num_decode = len(eng.decoding) if decode else 0
    context = eng.live_kv_tokens() if decode else 0
    prefill = cached = pairs = 0
    for seq, chunk in work:
        cached += seq.computed
        prefill += chunk
        pairs += prefill_pairs(seq.computed, chunk)
    spec = eng.speculation
    if spec is not None and not work and num_decode and spec.applies(num_decode):
        dt = decode_iteration_s(eng.coef, spec, num_decode, context)
    elif eng.step_k is not None:
        dt = _step_s(eng, eng.step_k, prefill, num_decode, pairs, context, cached)
    else:
        dt = step_s(eng.coef, prefill, num_decode, pairs, context, cached)
    if eng.jitter is not None:
        dt *= eng.jitter()
    dt += eng.extra_s
    eng.extra_s = 0.0
    _account(eng, dt)
    start = eng.now
    eng.now += dt
    eng.group_steps = 0 if work else eng.group_steps + 1
    if decode:
        _finish_decode_step(eng)
    for seq, chunk in work:
        _finish_chunk(eng, seq, chunk, start)
    eng.reserved_blocks = 0


def _step_s(eng, k, prefill, num_decode, pairs, context, cached):
    """step_s(eng.coef, prefill, num_decode, pairs, context, cached) of a model
    step_model.step_constants covers: _terms' and _stage's expressions in their order with
    the coefficients' factors folded (the same floats), in C types where compiled."""
    (dense, moe, gemm_rate, moe_rate, pair, attn_rate, weights, kvb, state, bw, overhead,
     eager, graph_max, prefill_eager, cpu_step, cpu_seq, overlap, collectives, token_cap,
     pair_cap, kv_cap, seq_cap) = k
    tokens = prefill + num_decode
    seqs = num_decode + (1 if prefill else 0)
    attended = pairs + context
    held = cached + context + tokens
    if tokens > token_cap or attended > pair_cap or held > kv_cap or seqs > seq_cap:
        return step_s(eng.coef, prefill, num_decode, pairs, context, cached)
    gemm = dense * tokens / gemm_rate + moe * tokens / moe_rate
    attention = pair * attended / attn_rate
    kv = kvb * held
    kv += 2 * state * seqs
    memory = (weights + kv) / bw
    collective = collective_s(eng.coef, tokens) if collectives else 0.0
    if not (eager and (tokens > graph_max or prefill and prefill_eager)):
        eager = 0.0
    cpu = cpu_step + cpu_seq * seqs
    compute = gemm + attention
    gpu = (compute if compute > memory else memory) + collective + overhead + eager
    if overlap:
        return gpu if gpu > cpu else cpu
    return gpu + cpu


def _decode_only(eng, holds_back):
    """Nothing waits, or decode-priority (holds_back) holds the waiting prompts back now."""
    if not eng.waiting:
        return True
    return holds_back and not eng.waiting[0].swapped_tokens \
        and not decode_due(eng)


def _account(eng, dt):
    eng.num_iterations += 1
    eng.busy_s += dt
    waiting = len(eng.waiting)
    eng.queue_area += waiting * dt
    eng.system_area += (waiting + len(eng.running)) * dt
    live = eng.live_kv_tokens()
    for seq in eng.prefilling:  # and the prompts' computed tokens
        live += seq.computed
    times, tokens, blocks = eng.sample_times, eng.sample_tokens, eng.sample_blocks
    if COMPILED and _typed_columns(times, tokens, blocks, eng.ends):  # noqa: F821
        _push_double(times, eng.now)  # noqa: F821 (engine.pxd)
        _push_int(tokens, live)  # noqa: F821
        _push_int(blocks, eng.pool.used_blocks)  # noqa: F821
    else:
        times.append(eng.now)
        tokens.append(live)
        blocks.append(eng.pool.used_blocks)


def _finish_decode_step(eng):
    j = eng.dec_idx
    if COMPILED and _typed_columns(eng.sample_times, eng.sample_tokens,  # noqa: F821
                                   eng.sample_blocks, eng.ends):
        _push_double(eng.ends, eng.now)  # noqa: F821 (engine.pxd)
    else:
        eng.ends.append(eng.now)
    eng.pool.free -= eng.residue[j % eng.bsz]
    eng.dec_idx = j + 1
    for seq in eng.finish_at.pop(j, ()):
        if seq.request_id in eng.decoding and seq.j0 + seq.output_tokens \
                - seq.generated - 1 == j:
            eng.finish(seq, eng._stop_decoding(seq, j))


def _finish_chunk(eng, seq, chunk, start):
    if seq.prefill_start_s is None:
        seq.prefill_start_s = start
    seq.computed += chunk
    seq.chunks += 1
    eng.owed -= chunk
    if seq.computed < seq.target:
        return
    eng.prefilling.remove(seq)
    eng.publish_prefix(seq)
    seq.prefill_end_s = eng.now
    seq.prefill_token_s.append(eng.now)
    if seq.generated:
        seq.extra_gaps_s.append(eng.now - seq.last_token_s)
    seq.last_token_s = eng.now
    seq.generated += 1
    eng.owed -= 1
    if seq.generated >= seq.output_tokens:
        eng.finish(seq, seq.target)
    else:
        eng.start_decoding(seq)


def _stuck(eng):
    """Nothing runs and the head cannot be admitted: reject it rather than spin."""
    seq = eng.waiting.popleft()
    eng.owed -= owed(seq)
    seq.state, seq.release_s = REJECTED, eng.now
    seq.reason = "could not be admitted with the pool empty"
    if eng.closed:
        eng.send_next()
