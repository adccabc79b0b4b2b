"""The event loop: a policy picks each iteration's work, the roofline prices it, time jumps."""

from .config import SchedulerConfig
from .engine import Engine
from .policies import PLANNERS, decode_due
from .roofline import Coefficients
from .sampling import Request
from .speculative import decode_iteration_s
from .state import REJECTED, SimResult
from .static import run_static
from .step_model import decode_pricer, prefill_pairs, step_s


def simulate(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
             num_blocks: int) -> SimResult:
    """Run every request to completion (or to config.max_time_s); deterministic."""
    eng = Engine(requests, coef, config, num_blocks)
    advance(eng, config.max_time_s)
    return finish_run(eng)


def advance(eng: Engine, until: float | None) -> None:
    """Run the iterations that start before `until` (None: until every request is done)."""
    if eng.cfg.policy == "static":
        run_static(eng, until)
    else:
        _run_iterations(eng, until)


def finish_run(eng: Engine) -> SimResult:
    res = eng.result
    res.end_s, res.decode_end_s = eng.now, res.decode_end_s
    res.peak_used_blocks = eng.pool.peak_used
    res.num_arrived = eng.next_arrival
    res.unheld_blocks = eng.pool.free + sum(eng.pool.group_blocks.values())
    return res


def _run_iterations(eng: Engine, horizon: float | None) -> None:
    plan = PLANNERS[eng.cfg.policy]
    while horizon is None or eng.now < horizon:
        eng.pull_arrivals()
        if eng.idle():
            if not eng.jump_to_next_arrival():
                return
            continue
        if eng.decoding and not eng.prefilling and not eng.extra_s and _decode_only(eng):
            steps = _decode_run(eng, horizon, eng.cfg.max_waiting_steps - eng.steps_since_prefill
                                if eng.waiting else None)
            eng.steps_since_prefill += steps if eng.waiting else 0
            continue
        eng.swap_in_waiting()
        work, decode = plan(eng)
        if not work and not (decode and eng.decoding) and not eng.extra_s:
            _stuck(eng)
            continue
        _iterate(eng, work, decode and bool(eng.decoding))


def _iterate(eng: Engine, work: list, decode: bool) -> None:
    """One forward pass: the decode set steps (if chosen) and each prefill chunk computes."""
    num_decode = len(eng.decoding) if decode else 0
    context = eng.live_kv_tokens() if decode else 0
    prefill = cached = pairs = 0
    for seq, chunk in work:
        cached += seq.computed
        prefill += chunk
        pairs += prefill_pairs(seq.computed, chunk)
    spec = eng.cfg.speculation
    if spec is not None and not work and num_decode and spec.applies(num_decode):
        dt = decode_iteration_s(eng.coef, spec, num_decode, context)
    else:
        dt = step_s(eng.coef, prefill, num_decode, pairs, context, cached)
    if eng.jitter is not None:
        dt *= eng.jitter()
    dt += eng.extra_s
    eng.extra_s = 0.0
    _account(eng, dt)
    start = eng.now
    eng.now += dt
    if decode:
        _finish_decode_step(eng)
    for seq, chunk in work:
        _finish_chunk(eng, seq, chunk, start)
    eng.reserved_blocks = 0


def _decode_only(eng: Engine) -> bool:
    """Nothing waits, or decode-priority holds the waiting prompts back for now."""
    if not eng.waiting:
        return True
    return eng.cfg.policy == "decode-priority" and not eng.waiting[0].swapped_tokens \
        and not decode_due(eng)


def _decode_run(eng: Engine, horizon: float | None, max_steps: int | None) -> int:
    """Decode-only iterations: the hot path, with the bookkeeping of _iterate, _account and
    _finish_decode_step inlined, until the next arrival, an empty decode set, max_steps, a
    preemption, or (with prompts waiting) decode-priority's prefill coming due. Returns the
    iterations run."""
    res, pool, coef, residue, bsz = eng.result, eng.pool, eng.coef, eng.residue, eng.bsz
    ends, samples, finish_at, decoding = res.decode_end_s, res.kv_samples, eng.finish_at, \
        eng.decoding
    seqs, nxt = eng.seqs, eng.next_arrival
    next_arrival = seqs[nxt].ready_s if nxt < len(seqs) else float("inf")
    stop = min(next_arrival, horizon if horizon is not None else float("inf"))
    num_waiting, steps = len(eng.waiting), 0
    limit = max_steps if max_steps is not None else float("inf")
    price, jitter = decode_pricer(coef), eng.jitter
    total_blocks, spec = pool.num_blocks, eng.cfg.speculation
    busy = queue_area = system_area = 0.0
    while decoding and eng.now < stop and steps < limit:
        j = eng.dec_idx
        need = residue[j % bsz]
        if need > pool.free:
            eng.make_room_for_decode()
            if len(eng.waiting) != num_waiting:
                break
            need = residue[j % bsz]
        n = len(decoding)
        live = eng.ctx_base + n * j
        dt = decode_iteration_s(coef, spec, n, live) if spec is not None and spec.applies(n) \
            else price(n, live)
        if jitter is not None:
            dt *= jitter()
        busy += dt
        queue_area += num_waiting * dt
        system_area += (n + num_waiting) * dt
        samples.append((eng.now, live, total_blocks - pool.free))
        eng.now += dt
        ends.append(eng.now)
        pool.free -= need
        eng.dec_idx = j + 1
        steps += 1
        done = finish_at.pop(j, None)
        if done:
            for seq in done:
                if seq.req.request_id in decoding and seq.j0 + seq.req.output_tokens \
                        - seq.generated - 1 == j:
                    eng.finish(seq, eng._stop_decoding(seq, j))
            if num_waiting and decode_due(eng) or eng.closed:
                break
    res.num_iterations += steps
    res.busy_s += busy
    res.queue_area += queue_area
    res.system_area += system_area
    return steps


def _account(eng: Engine, dt: float) -> None:
    res = eng.result
    res.num_iterations += 1
    res.busy_s += dt
    res.queue_area += len(eng.waiting) * dt
    res.system_area += (len(eng.waiting) + len(eng.running)) * dt
    res.kv_samples.append((eng.now, eng.live_kv_tokens() + sum(s.computed for s in eng.prefilling),
                           eng.pool.used_blocks))


def _finish_decode_step(eng: Engine) -> None:
    j = eng.dec_idx
    eng.result.decode_end_s.append(eng.now)
    eng.pool.free -= eng.residue[j % eng.bsz]
    eng.dec_idx = j + 1
    for seq in eng.finish_at.pop(j, ()):
        if seq.req.request_id in eng.decoding and seq.j0 + seq.req.output_tokens \
                - seq.generated - 1 == j:
            eng.finish(seq, eng._stop_decoding(seq, j))


def _finish_chunk(eng: Engine, seq, chunk: int, start: float) -> None:
    if seq.prefill_start_s is None:
        seq.prefill_start_s = start
    seq.computed += chunk
    seq.chunks += 1
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
    if seq.generated >= seq.req.output_tokens:
        eng.finish(seq, seq.target)
    else:
        eng.start_decoding(seq)


def _stuck(eng: Engine) -> None:
    """Nothing runs and the head cannot be admitted: reject it rather than spin."""
    seq = eng.waiting.popleft()
    seq.state, seq.release_s = REJECTED, eng.now
    seq.reason = "could not be admitted with the pool empty"
    if eng.closed:
        eng.send_next()
