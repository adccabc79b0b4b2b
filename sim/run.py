"""simulate(): the event loop. Each iteration a policy picks decode and prefill work, the
roofline prices it, and the clock jumps to its end (or to the next arrival when idle)."""

from .config import SchedulerConfig
from .engine import Engine
from .roofline import Coefficients, iteration_s
from .sampling import Request
from .state import REJECTED, SimResult
from .static import run_static


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
        if not eng.waiting and not eng.prefilling and eng.decoding and not eng.extra_s:
            _decode_run(eng, horizon)
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
    kv_read = eng.live_kv_tokens() if decode else 0
    tokens = num_decode
    for seq, chunk in work:
        kv_read += seq.computed
        tokens += chunk
    dt = iteration_s(eng.coef, tokens, kv_read) + eng.extra_s
    eng.extra_s = 0.0
    _account(eng, dt)
    start = eng.now
    eng.now += dt
    if decode:
        _finish_decode_step(eng)
    for seq, chunk in work:
        _finish_chunk(eng, seq, chunk, start)
    eng.reserved_blocks = 0


def _decode_run(eng: Engine, horizon: float | None) -> None:
    """Decode-only iterations while nothing waits: the hot path, with the bookkeeping of
    _iterate, _account and _finish_decode_step inlined until the next arrival or an empty
    decode set."""
    res, pool, coef, residue, bsz = eng.result, eng.pool, eng.coef, eng.residue, eng.bsz
    ends, samples, finish_at, decoding = res.decode_end_s, res.kv_samples, eng.finish_at, \
        eng.decoding
    seqs, nxt = eng.seqs, eng.next_arrival
    next_arrival = seqs[nxt].ready_s if nxt < len(seqs) else float("inf")
    stop = min(next_arrival, horizon if horizon is not None else float("inf"))
    while decoding and eng.now < stop:
        j = eng.dec_idx
        if residue[j % bsz] > pool.free:
            eng.make_room_for_decode()
            if eng.waiting:
                return
        n = len(decoding)
        live = eng.ctx_base + n * j
        dt = iteration_s(coef, n, live)
        res.num_iterations += 1
        res.busy_s += dt
        res.system_area += n * dt
        samples.append((eng.now, live, pool.num_blocks - pool.free))
        eng.now += dt
        ends.append(eng.now)
        pool.free -= residue[j % bsz]
        eng.dec_idx = j + 1
        for seq in finish_at.pop(j, ()):
            if seq.req.request_id in decoding and seq.j0 + seq.req.output_tokens \
                    - seq.generated - 1 == j:
                eng.finish(seq, eng._stop_decoding(seq, j))


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


# policies -----------------------------------------------------------------------------------
def _admit(eng: Engine, budget: int, allow_oversize: bool, chunked: bool = False) -> list:
    """Admit waiting prompts FCFS while sequence, token and block budgets allow."""
    work, cfg = [], eng.cfg
    while eng.waiting and len(eng.running) < cfg.max_num_seqs and budget > 0:
        seq = eng.waiting[0]
        if seq.swapped_tokens:
            break
        need = eng.prefill_need(seq)
        if need > budget and not chunked and (work or not allow_oversize):
            break
        if not eng.try_admit(seq):
            break
        chunk = min(seq.target - seq.computed, budget) if chunked else seq.target - seq.computed
        work.append((seq, chunk))
        budget -= chunk
    return work


def _continuous(eng: Engine):
    eng.reserve_decode()
    budget = eng.cfg.max_num_batched_tokens - len(eng.decoding)
    return _admit(eng, max(budget, 1), allow_oversize=True), True


def _prefill_priority(eng: Engine):
    work = _admit(eng, eng.cfg.max_num_batched_tokens, allow_oversize=True)
    if not work:
        eng.reserve_decode()
    return work, not work


def _decode_priority(eng: Engine):
    cfg = eng.cfg
    due = (not eng.decoding or eng.steps_since_prefill >= cfg.max_waiting_steps
           or len(eng.waiting) >= cfg.waiting_served_ratio * len(eng.running))
    work = _admit(eng, cfg.max_num_batched_tokens, allow_oversize=True) if due else []
    if work:
        eng.steps_since_prefill = 0
        return work, False
    eng.reserve_decode()
    eng.steps_since_prefill += 1
    return [], True


def _chunked_prefill(eng: Engine):
    eng.reserve_decode()
    budget = eng.cfg.max_num_batched_tokens - len(eng.decoding)
    work = []
    for seq in eng.prefilling:
        if budget <= 0:
            break
        chunk = min(seq.target - seq.computed, budget)
        work.append((seq, chunk))
        budget -= chunk
    return work + _admit(eng, budget, allow_oversize=False, chunked=True), True


PLANNERS = {"continuous": _continuous, "prefill-priority": _prefill_priority,
            "decode-priority": _decode_priority, "chunked-prefill": _chunked_prefill}
