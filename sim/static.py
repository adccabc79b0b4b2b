"""Static batching: a fixed group padded to its longest prompt and output, released together."""

from servecap.ledger.paging import blocks_for

from .engine import owed
from .state import DONE, RUNNING
from .step_model import prefill_pairs, step_s


def run_static(eng, horizon: float | None) -> None:
    """When the engine is idle, take up to max_num_seqs waiting requests whose padded KV
    (group size x blocks for the longest prompt + longest output, and a hybrid's
    state) fits; run the group's
    prefill and decode steps as one shape; new arrivals wait for the batch boundary."""
    while horizon is None or eng.now < horizon:
        eng.pull_arrivals()
        if not eng.waiting:
            if not eng.jump_to_next_arrival():
                return
            continue
        _run_group(eng, _take_group(eng))


def _take_group(eng) -> list:
    group, longest = [], 0
    limit = eng.pool.num_blocks - eng.pool.watermark_blocks
    while eng.waiting and len(group) < eng.cfg.max_num_seqs:
        req = eng.waiting[0].req
        padded = max(longest, req.prompt_tokens + req.output_tokens)
        per_seq = blocks_for(padded, eng.bsz) + eng.cfg.state_blocks
        if group and (len(group) + 1) * per_seq > limit:
            break
        group.append(eng.waiting.popleft())
        eng.owed -= owed(group[-1])
        longest = padded
    return group


def _run_group(eng, group: list) -> None:
    res, n = eng.result, len(group)
    prompt = max(s.req.prompt_tokens for s in group)
    steps = max(s.req.output_tokens for s in group) - 1
    start = eng.now
    for seq in group:
        seq.state, seq.admitted_s, seq.prefill_start_s = RUNNING, start, start
    _advance(eng, step_s(eng.coef, n * prompt, 0, n * prefill_pairs(0, prompt), 0), n)
    j0 = eng.dec_idx
    for seq in group:
        seq.prefill_end_s = eng.now
        seq.prefill_token_s.append(eng.now)
        seq.last_token_s = eng.now
        seq.chunks, seq.generated = 1, seq.req.output_tokens
        if seq.req.output_tokens > 1:
            seq.segments.append((j0, j0 + seq.req.output_tokens - 2, eng.now))
    for step in range(steps):
        _advance(eng, step_s(eng.coef, 0, n, 0, n * (prompt + step)), n)
        res.decode_end_s.append(eng.now)
        eng.dec_idx += 1
    for seq in group:
        seq.state, seq.release_s = DONE, eng.now
        if eng.closed:
            eng.send_next()
        if seq.segments:
            seq.last_token_s = res.decode_end_s[seq.segments[-1][1]]


def _advance(eng, dt: float, num_running: int) -> None:
    if eng.jitter is not None:
        dt *= eng.jitter()
    eng.num_iterations += 1
    eng.busy_s += dt
    eng.queue_area += len(eng.waiting) * dt
    eng.system_area += (len(eng.waiting) + num_running) * dt
    eng.now += dt
    eng.pull_arrivals()
