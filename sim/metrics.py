"""Request and engine metrics from a SimResult: latency percentiles, throughput, SLO goodput."""

import math
from dataclasses import dataclass

from .state import DONE, REJECTED, RUNNING, Seq, SimResult

PERCENTILE_METHOD = ("nearest rank: the smallest sample with at least p% of all samples at or "
                     "below it (ITL: every token gap is one sample)")
QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


@dataclass(frozen=True)
class SLO:
    """Latency targets in seconds; None: not a target. A request meets the ITL target when
    its TPOT (mean gap between its tokens) is within it."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    # percentiles (in %) the report adds to p50/p95/p99/mean, with the max (--percentiles);
    # carried here because the targets and the report travel together to every summary
    percentiles: tuple[float, ...] = ()

    def met(self, seq: Seq) -> bool:
        if seq.state != DONE:
            return False
        req = seq.req
        checks = ((self.ttft_s, seq.first_token_s - req.arrival_s),
                  (self.itl_s, tpot_s(seq)), (self.e2e_s, seq.release_s - req.arrival_s))
        return all(limit is None or value <= limit for limit, value in checks)


def percentile_key(percent: float) -> str:
    """99.9 -> 'p99.9', 50 -> 'p50' (vllm bench serve's --metric-percentiles names)."""
    return f"p{percent:g}"


def wanted_quantiles(extra: tuple[float, ...]) -> tuple[list[tuple[str, float]], list[str]]:
    """The (name, fraction) pairs a summary reports, p50/p95/p99 and the `extra` percentiles
    (in %), and the keys of its dict in order: those names, the mean, and the max with extras."""
    wanted = list(QUANTILES) + [(percentile_key(p), p / 100) for p in extra
                                if percentile_key(p) not in dict(QUANTILES)]
    return wanted, [name for name, _ in wanted] + ["mean"] + (["max"] if extra else [])


def nearest_rank(fraction: float, total: int) -> int:
    """The 1-based nearest rank of a fraction of `total` samples (rounded to 6 places first,
    so 0.95 x 100 is rank 95, not 96)."""
    return max(1, math.ceil(round(fraction * total, 6)))


def weighted_quantiles(pairs: list[tuple[float, int]],
                       extra: tuple[float, ...] = ()) -> dict[str, float | None]:
    """Nearest rank over (value, count) pairs, plus the mean; values unchanged (seconds in,
    seconds out). `extra` percentiles (in %) add their keys and the max. No samples (nothing
    completed, or one-token outputs for ITL) gives None for each: a latency that was never
    observed is not zero."""
    wanted, keys = wanted_quantiles(extra)
    pairs = sorted(p for p in pairs if p[1] > 0)
    total = sum(w for _, w in pairs)
    if not total:
        return dict.fromkeys(keys)
    out = {}
    for name, q in sorted(wanted, key=lambda item: item[1]):
        out[name] = _nearest_rank(pairs, nearest_rank(q, total))
    out["mean"] = sum(v * w for v, w in pairs) / total
    if extra:
        out["max"] = pairs[-1][0]
    return {k: out[k] for k in keys}


def _nearest_rank(pairs: list[tuple[float, int]], rank: int) -> float:
    cum = 0
    for value, count in pairs:
        cum += count
        if cum >= rank:
            return value
    return pairs[-1][0]


def quantiles(values: list[float], extra: tuple[float, ...] = ()) -> dict[str, float | None]:
    """weighted_quantiles of unit-count values, on the plain sorted floats: the same ranks,
    and the mean summed in the same (sorted) order, without a tuple per sample."""
    wanted, keys = wanted_quantiles(extra)
    total = len(values)
    if not total:
        return dict.fromkeys(keys)
    ordered = sorted(values)
    out = {name: ordered[min(nearest_rank(q, total), total) - 1] for name, q in wanted}
    out["mean"] = sum(ordered) / total
    if extra:
        out["max"] = ordered[-1]
    return {k: out[k] for k in keys}


def tpot_s(seq: Seq) -> float:
    """(last token - first token) / (output tokens - 1); 0 for one-token outputs."""
    n = seq.req.output_tokens
    return (seq.last_token_s - seq.first_token_s) / (n - 1) if n > 1 else 0.0


def itl_pairs(result: SimResult) -> list[tuple[float, int]]:
    """Every gap between consecutive tokens of a request, as (gap s, count). Gaps inside decode
    segments are shared per decode iteration (count = sequences that stepped in both it and
    the one before), so this is linear in iterations plus segments, not in tokens."""
    ends = result.decode_end_s
    weights = [0] * (len(ends) + 2)
    pairs = []
    for seq in result.seqs:
        for first, last, prev_s in seq.segments:
            pairs.append((ends[first] - prev_s, 1))
            weights[first + 1] += 1
            weights[last + 1] -= 1
        pairs.extend((gap, 1) for gap in seq.extra_gaps_s)
    live = 0
    for j in range(1, len(ends)):
        live += weights[j]
        if live:
            pairs.append((ends[j] - ends[j - 1], live))
    return pairs


def ms(stats: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else round(v * 1000, 3) for k, v in stats.items()}


def summarize(result: SimResult | list[SimResult], slo: SLO = SLO()) -> dict:
    """The per-policy report over one engine or several replicas: counts, throughput,
    latency percentiles (ms), goodput."""
    results = result if isinstance(result, list) else [result]
    seqs = [s for r in results for s in r.seqs[:r.num_arrived]]
    pairs = [p for r in results for p in itl_pairs(r)]
    report = summarize_seqs(results[0].policy, seqs, pairs, slo)
    report["not_arrived"] = sum(len(r.seqs) - r.num_arrived for r in results)
    report["num_iterations"] = sum(r.num_iterations for r in results)
    return report


def summarize_seqs(policy: str, seqs: list[Seq], pairs: list[tuple[float, int]],
                   slo: SLO) -> dict:
    """The report from arrived requests and their token gaps (see itl_pairs)."""
    done = [s for s in seqs if s.state == DONE]
    rejected = [s for s in seqs if s.state == REJECTED]
    start = min((s.req.arrival_s for s in seqs), default=0.0)
    end = max((s.release_s for s in done), default=start)
    span = max(end - start, 1e-12)
    met = sum(1 for s in done if slo.met(s))
    return {
        "policy": policy,
        "offered": len(seqs),
        "completed": len(done),
        "rejected": len(rejected),
        "queued": len(seqs) - len(done) - len(rejected),
        "running_at_end": sum(1 for s in seqs if s.state == RUNNING),
        "rejection_reasons": sorted({s.reason for s in rejected}),
        "preemptions": sum(s.preemptions for s in seqs),
        "recomputed_tokens": sum(s.recomputed_tokens for s in seqs),
        "prefix_hit_tokens": sum(s.prefix_hit_tokens for s in seqs),
        "prefix_hit_rate": _prefix_hit_rate(done),
        "duration_s": round(span, 6),
        "offered_rps": _offered_rps(seqs),
        "achieved_rps": len(done) / span,
        "input_tokens_per_s": sum(s.req.prompt_tokens for s in done) / span,
        "output_tokens_per_s": sum(s.req.output_tokens for s in done) / span,
        "slo_attainment": met / len(seqs) if seqs else 0.0,
        "goodput_rps": met / span,
        **latency(done, pairs, slo.percentiles),
        "percentile_method": PERCENTILE_METHOD,
    }


def latency(done: list[Seq], pairs: list[tuple[float, int]],
            extra: tuple[float, ...] = ()) -> dict:
    """queue (acceptance to admission), TTFT, ITL, TPOT and end-to-end, in ms."""
    arrive = [s.req.arrival_s for s in done]
    return {
        "queue_ms": ms(quantiles([s.admitted_s - a for s, a in zip(done, arrive, strict=True)],
                                 extra)),
        "ttft_ms": ms(quantiles([s.first_token_s - a
                                 for s, a in zip(done, arrive, strict=True)], extra)),
        "itl_ms": ms(weighted_quantiles(pairs, extra)),
        "tpot_ms": ms(quantiles([tpot_s(s) for s in done if s.req.output_tokens > 1], extra)),
        "e2e_ms": ms(quantiles([s.release_s - a for s, a in zip(done, arrive, strict=True)],
                               extra)),
    }


def _offered_rps(seqs: list[Seq]) -> float | None:
    """(n - 1) / arrival span; None when every request arrives at once (no finite rate)."""
    if len(seqs) < 2:
        return None
    times = [s.req.arrival_s for s in seqs]
    first, last = min(times), max(times)
    return (len(seqs) - 1) / (last - first) if last > first else None


def _prefix_hit_rate(done: list[Seq]) -> float:
    """Prefix tokens served from cache over prefix tokens offered (completed requests)."""
    offered = sum(s.req.prefix_tokens for s in done)
    return sum(s.prefix_hit_tokens for s in done) / offered if offered else 0.0
