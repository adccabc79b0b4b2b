"""The policies: which waiting prompts join an iteration, and whether the decode set steps."""

from .engine import Engine


def _admit(eng: Engine, budget: int, allow_oversize: bool, chunked: bool = False) -> list:
    """Admit waiting prompts FCFS while sequence, token and block budgets allow."""
    work = []
    while eng.waiting and len(eng.running) < eng.max_num_seqs and budget > 0:
        seq = eng.waiting[0]
        if seq.swapped_tokens:
            break
        # chunked prefill takes any prompt in chunks: only whole prompts weigh their need
        if not chunked and eng.prefill_need(seq) > budget and (work or not allow_oversize):
            break
        if not eng.try_admit(seq):
            break
        chunk = min(seq.target - seq.computed, budget) if chunked else seq.target - seq.computed
        work.append((seq, chunk))
        budget -= chunk
    return work


def _continuous(eng: Engine):
    eng.reserve_decode()
    budget = eng.max_num_batched_tokens - len(eng.decoding)
    return _admit(eng, max(budget, 1), allow_oversize=True), True


def _prefill_priority(eng: Engine):
    work = _admit(eng, eng.max_num_batched_tokens, allow_oversize=True)
    if not work:
        eng.reserve_decode()
    return work, not work


def decode_due(eng: Engine) -> bool:
    """Decode-priority prefills when nothing decodes, when prompts have waited
    max_waiting_steps decode iterations, or when they outnumber waiting_served_ratio x the
    running set."""
    return (not eng.decoding or eng.steps_since_prefill >= eng.max_waiting_steps
            or len(eng.waiting) >= eng.cfg.waiting_served_ratio * len(eng.running))


def _decode_priority(eng: Engine):
    work = _admit(eng, eng.max_num_batched_tokens, allow_oversize=True) \
        if decode_due(eng) else []
    if work:
        eng.steps_since_prefill = 0
        return work, False
    eng.reserve_decode()
    eng.steps_since_prefill += 1 if eng.waiting else 0
    return [], True


def _chunked_prefill(eng: Engine):
    eng.reserve_decode()
    budget = eng.max_num_batched_tokens - len(eng.decoding)
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
