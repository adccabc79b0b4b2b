"""Per-request latency from the engine's records: queue delay, TTFT, ITL, end-to-end, tokens/s.

Time zero of a request is its acceptance (the simulator's definition). Percentiles are linear
interpolation between closest ranks (numpy's default 'linear' method).
"""

from dataclasses import dataclass

from .sequence import FINISHED, RequestRecord


@dataclass(frozen=True)
class RequestTimes:
    """One finished request, seconds; itl_s holds every gap between consecutive tokens."""

    request_id: int
    num_prompt_tokens: int
    num_output_tokens: int
    queue_s: float
    ttft_s: float
    itl_s: tuple[float, ...]
    e2e_s: float
    num_preemptions: int


def request_times(record: RequestRecord) -> RequestTimes:
    start = record.accepted_s
    ready = record.token_ready_s
    gaps = tuple(b - a for a, b in zip(ready, ready[1:], strict=False))
    return RequestTimes(record.request_id, record.num_prompt_tokens, len(ready),
                        record.admitted_s - start, ready[0] - start, gaps,
                        record.released_s - start, record.num_preemptions)


def percentile(values: list[float], pct: float) -> float:
    """Linear interpolation between the two closest ranks; pct in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(values: list[float]) -> dict:
    """{p50, p95, p99, mean} in milliseconds; None when nothing finished (JSON has no NaN)."""
    if not values:
        return dict.fromkeys(("p50", "p95", "p99", "mean"))
    out = {f"p{p}": percentile(values, p) * 1e3 for p in (50, 95, 99)}
    out["mean"] = sum(values) / len(values) * 1e3
    return out


def latency_report(records: list[RequestRecord], wall_s: float) -> dict:
    """Every finished request's times and the load's percentiles and throughput."""
    done = [request_times(r) for r in records if r.status == FINISHED and r.token_ready_s]
    itl = [gap for t in done for gap in t.itl_s]
    return {
        "percentile_method": "linear interpolation between closest ranks",
        "num_requests": len(records),
        "num_finished": len(done),
        "wall_s": wall_s,
        "num_preemptions": sum(t.num_preemptions for t in done),
        "input_tokens_per_s": sum(t.num_prompt_tokens for t in done) / wall_s,
        "output_tokens_per_s": sum(t.num_output_tokens for t in done) / wall_s,
        "queue_ms": summary_ms([t.queue_s for t in done]),
        "ttft_ms": summary_ms([t.ttft_s for t in done]),
        "itl_ms": summary_ms(itl),
        "e2e_ms": summary_ms([t.e2e_s for t in done]),
        "requests": [_request_dict(t) for t in done],
    }


def _request_dict(times: RequestTimes) -> dict:
    itl = list(times.itl_s)
    return {"request_id": times.request_id, "prompt_tokens": times.num_prompt_tokens,
            "output_tokens": times.num_output_tokens, "queue_ms": times.queue_s * 1e3,
            "ttft_ms": times.ttft_s * 1e3,
            "itl_ms_mean": sum(itl) / len(itl) * 1e3 if itl else None,
            "e2e_ms": times.e2e_s * 1e3, "preemptions": times.num_preemptions}
