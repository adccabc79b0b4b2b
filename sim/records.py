"""Per-request rows: every timestamp from acceptance to release, and why a request was slow."""

import numpy as np

from .columns import RequestColumns, seq_sum, stable_argsort
from .columns import quantiles as column_quantiles
from .metrics import SLO, ms, quantiles, tpot_s
from .state import DONE, KvSamples, Seq, SimResult, kv_columns

RECORD_COLUMNS = (
    "policy", "deployment", "request_id", "state", "reason", "arrival_s", "admitted_s",
    "prefill_start_s", "prefill_end_s", "first_token_s", "last_token_s", "release_s",
    "prompt_tokens", "output_tokens", "prefix_group", "prefix_hit_tokens", "queue_ms",
    "ttft_ms", "tpot_ms", "e2e_ms", "prefill_chunks", "preemptions", "recomputed_tokens")


def records(policy: str, deployment: str, seqs: list[Seq]) -> list[dict]:
    """One row per request, in arrival order. Times are simulation seconds; *_ms columns are
    measured from the request's acceptance (its arrival)."""
    return [{"deployment": deployment} | _row(policy, seq) for seq in seqs]


def _row(policy: str, seq: Seq) -> dict:
    req, done = seq.req, seq.state == DONE

    def since(value):
        return "" if value is None else round((value - req.arrival_s) * 1000, 3)

    return {
        "policy": policy, "request_id": req.request_id, "state": seq.state,
        "reason": seq.reason, "arrival_s": _t(req.arrival_s), "admitted_s": _t(seq.admitted_s),
        "prefill_start_s": _t(seq.prefill_start_s), "prefill_end_s": _t(seq.prefill_end_s),
        "first_token_s": _t(seq.first_token_s),
        "last_token_s": _t(seq.last_token_s if done else None),
        "release_s": _t(seq.release_s), "prompt_tokens": req.prompt_tokens,
        "output_tokens": req.output_tokens, "prefix_group": req.prefix_group or "",
        "prefix_hit_tokens": seq.prefix_hit_tokens, "queue_ms": since(seq.admitted_s),
        "ttft_ms": since(seq.first_token_s),
        "tpot_ms": round(tpot_s(seq) * 1000, 3) if done else "",
        "e2e_ms": since(seq.release_s) if done else "", "prefill_chunks": seq.chunks,
        "preemptions": seq.preemptions, "recomputed_tokens": seq.recomputed_tokens,
    }


def _t(value):
    return "" if value is None else round(value, 6)


def tail(seqs: list[Seq], share: float = 0.01,
         columns: RequestColumns | None = None) -> dict:
    """The slowest `share` of completed requests by end-to-end latency against all of them:
    mean queue age, prefill chunks, preemptions and prompt length, to say why they are slow.
    columns: the requests' (RequestColumns), where the caller has them."""
    cols = RequestColumns(seqs) if columns is None else columns
    done = np.flatnonzero(cols.done)
    if not len(done):
        return {}
    arrival = cols.arrival[done]
    e2e = cols.release[done] - arrival
    order = stable_argsort(e2e)  # sorted()'s stable order, on the column
    slow = order[-max(1, int(len(done) * share)):]
    queue = cols.admitted[done] - arrival
    return {"share": share, "num_requests": len(slow),
            "tail": _profile(cols, done[slow], queue[slow]),
            "all": _profile(cols, done, queue[order])}


def _profile(cols: RequestColumns, rows: np.ndarray, queue: np.ndarray) -> dict:
    """Means over the requests `rows`; the queue's float sum adds in the order given (by
    latency), as it always has, and the integer sums need no order."""
    n = len(rows)
    return {
        "mean_queue_ms": round(seq_sum(queue) / n * 1000, 3),
        "mean_prefill_chunks": round(int(cols.chunks[rows].sum()) / n, 3),
        "mean_preemptions": round(int(cols.preemptions[rows].sum()) / n, 3),
        "mean_prompt_tokens": round(int(cols.prompt[rows].sum()) / n, 1),
        "mean_output_tokens": round(int(cols.output[rows].sum()) / n, 1),
    }


def kv_occupancy(result: SimResult) -> dict:
    """Logical KV tokens (what the formula needs) against physical blocks held, per iteration.
    logical_tokens_per_slot below 1 is paging's unused tail; above 1, shared prefix blocks."""
    samples = result.kv_samples
    bsz = result.config.block_size_tokens
    if not samples:
        return {"num_blocks": result.num_blocks, "peak_used_blocks": result.peak_used_blocks}
    _, tokens, held = kv_columns(samples)
    # a run's samples are C integers: their max on the column, not a million Python ints
    most = int(np.asarray(tokens).max()) if isinstance(samples, KvSamples) else max(tokens)
    logical, blocks = _exact_sum(tokens), _exact_sum(held)
    return {
        "num_blocks": result.num_blocks, "block_size_tokens": bsz,
        "peak_used_blocks": result.peak_used_blocks,
        "mean_used_blocks": round(blocks / len(samples), 1),
        "mean_logical_tokens": round(logical / len(samples), 1),
        "max_logical_tokens": most,
        "logical_tokens_per_slot": round(logical / max(blocks * bsz, 1), 4),
        "timeline": [{"time_s": round(t, 6), "logical_tokens": n, "used_blocks": b}
                     for t, n, b in samples[::max(1, len(samples) // 100)]],
    }


def _exact_sum(column) -> int:
    """The integers' sum, exact in any order: numpy's int64 sum over the column where no
    partial sum can pass 2^63 (every value below 2^63 / its count), else Python's."""
    values = np.asarray(column, dtype=np.int64)
    if len(values) and 0 <= int(values.min()) and int(values.max()) < 2**63 // len(values):
        return int(values.sum())
    return sum(column)


def by_prompt_bucket(seqs: list[Seq], edges_tokens: tuple[int, ...],
                     columns: RequestColumns | None = None) -> list[dict]:
    """Completed requests grouped by prompt length (<= each edge, then above the last), so
    lengths are not mixed when latencies are compared."""
    bounds, low = [], 0
    for high in (*edges_tokens, None):
        bounds.append((low, high))
        low = high or low
    ttft: list[np.ndarray] = []  # each group's latencies (s), in order
    e2e: list[np.ndarray] = []
    cols = RequestColumns(seqs) if columns is None else columns
    done, prompt = cols.done, cols.prompt
    for low, high in bounds:
        group = done & (prompt > low) & (True if high is None else prompt <= high)
        arrival = cols.arrival[group]
        ttft.append(cols.first[group] - arrival)
        e2e.append(cols.release[group] - arrival)
    return [{"prompt_tokens_above": low, "prompt_tokens_max": high, "completed": len(times),
             "ttft_ms": ms(column_quantiles(times)),
             "e2e_ms": ms(column_quantiles(ends))}
            for times, ends, (low, high) in zip(ttft, e2e, bounds, strict=True)]


def per_replica(results: list[SimResult]) -> list[dict]:
    """How the router spread the load: requests, tokens and tail TTFT per replica."""
    rows = []
    for index, res in enumerate(results):
        done = [s for s in res.seqs if s.state == DONE]
        rows.append({"replica": index, "requests": len(res.seqs), "completed": len(done),
                     "prompt_tokens": sum(s.req.prompt_tokens for s in res.seqs),
                     "output_tokens": sum(s.req.output_tokens for s in res.seqs),
                     "ttft_ms": ms(quantiles([s.first_token_s - s.req.arrival_s
                                              for s in done]))})
    return rows


TOKEN_COLUMNS = ("policy", "deployment", "request_id", "token_index", "ready_s", "gap_ms")


def token_rows(policy: str, deployment: str, results: list[SimResult],
               seqs: list[Seq]) -> list[dict]:
    """Every generated token's ready time, per request (rebuilt from the decode timelines of
    the engine that streamed it), with the gap since the previous token."""
    timeline = {id(s): r.decode_end_s for r in results for s in r.seqs}
    rows = []
    for seq in seqs:
        if seq.state != DONE:
            continue
        times = seq.token_times(timeline.get(id(seq), []))
        prev = None
        for index, ready in enumerate(times):
            gap = "" if prev is None else round((ready - prev) * 1000, 3)
            rows.append({"policy": policy, "deployment": deployment,
                         "request_id": seq.req.request_id, "token_index": index,
                         "ready_s": round(ready, 6), "gap_ms": gap})
            prev = ready
    return rows


def by_tenant(seqs: list[Seq], slo: SLO) -> list[dict]:
    """Per tenant: what each class of requests got (under priority scheduling, who paid)."""
    names = sorted({s.req.tenant for s in seqs if s.req.tenant is not None})
    rows = []
    for name in names:
        group = [s for s in seqs if s.req.tenant == name]
        done = [s for s in group if s.state == DONE]
        rows.append({"tenant": name, "priority": group[0].req.priority, "offered": len(group),
                     "completed": len(done),
                     "slo_attainment": sum(1 for s in done if slo.met(s)) / len(group),
                     "queue_ms": ms(quantiles([s.admitted_s - s.req.arrival_s for s in done])),
                     "ttft_ms": ms(quantiles([s.first_token_s - s.req.arrival_s
                                              for s in done])),
                     "e2e_ms": ms(quantiles([s.release_s - s.req.arrival_s for s in done]))})
    return rows
