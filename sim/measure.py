"""The report over the measured window: counts of the whole run, rates and latency of the
steady-state requests, and a 95 % batch-means interval on each figure people decide from.

Every run (one per --seeds draw) is measured in its own window (sim/steady.py); the windows'
requests are pooled for the estimates and each contributes NUM_BATCHES batches, in arrival
order, to the intervals (sim/intervals.py): TTFT, TPOT, ITL, E2E and queue p50/p99, SLO
attainment, goodput, achieved requests/s and output tokens/s.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .columns import floats
from .gaps import BatchGaps, Gaps
from .intervals import (
    Sorted,
    batch_bounds,
    quantile_interval,
    ratio_interval,
    share_interval,
    sorted_shares,
)
from .metrics import (
    PERCENTILE_METHOD,
    QUANTILES,
    SLO,
    percentile_key,
)
from .state import DONE, REJECTED, RUNNING, Seq, SimResult
from .steady import Window, find_window, whole_run

LATENCY = ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
CI_QUANTILES = (("p50", 0.50), ("p99", 0.99))
RATE_CIS = ("achieved_rps", "goodput_rps", "output_tokens_per_s")


@dataclass(frozen=True)
class Run:
    """One simulated run: every arrived request (in arrival order) and the engines whose
    decode timelines their token times index."""

    seqs: list[Seq]
    results: list[SimResult]


@dataclass(frozen=True)
class Batch:
    """Consecutive measured requests of one run and the seconds of arrivals they span."""

    seqs: list[Seq]
    duration_s: float
    timelines: dict


def measure(policy: str, runs: list[Run], slo: SLO, itl: bool = True,
            window: bool = True) -> dict:
    """The summary over every run's measured window (the keys of metrics.summarize_seqs,
    plus the window and the *_ci intervals). itl=False leaves the per-token ITL out (a
    search reads TPOT); window=False measures every request (what a benchmark of the same
    requests reports), still saying whether a steady state was reached."""
    windows = [find_window(r.seqs, r.results) for r in runs]
    if not window:
        windows = [whole_run(r.seqs, w) for r, w in zip(runs, windows, strict=True)]
    batches = [b for r, w in zip(runs, windows, strict=True) for b in _batches(r, w, itl)]
    every = [s for r in runs for s in r.seqs]
    report = _counts(policy, every, _has_offload(runs)) | _window(windows)
    rows = [_Rows(b.seqs, slo) for b in batches]
    report |= {"offered_rps": _offered(runs, windows)} | _rates(rows, batches)
    report |= _latency(rows, batches, slo.percentiles, itl)
    report["percentile_method"] = PERCENTILE_METHOD
    return report


def _batches(run: Run, window: Window, itl: bool) -> list[Batch]:
    """NUM_BATCHES consecutive batches of the window, each with its share of the window's
    seconds (its arrival span; the last closed one mean gap after its last arrival)."""
    seqs = run.seqs[window.start:window.stop]
    if not seqs:
        return []
    timelines = {id(s): r.decode_end_s for r in run.results for s in r.seqs} if itl else {}
    edges = batch_bounds(len(seqs))
    opens = [seqs[e].req.arrival_s for e in edges[:-1]]
    gap = (seqs[-1].req.arrival_s - seqs[0].req.arrival_s) / (len(seqs) - 1) \
        if len(seqs) > 1 else 0.0
    spans = [b - a for a, b in zip(opens, opens[1:] + [seqs[-1].req.arrival_s + gap],
                                   strict=True)]
    total = sum(spans)
    scale = [s / total * window.duration_s for s in spans] if total > 0 else \
        [window.duration_s / len(spans)] * len(spans)
    return [Batch(seqs[edges[i]:edges[i + 1]], scale[i], timelines)
            for i in range(len(edges) - 1)]


def _has_offload(runs: list[Run]) -> bool:
    """Whether any run's engine had a host KV offload tier; a measured server's stand-in
    (load/steady.py) carries no engine config and has none."""
    return any(getattr(getattr(res, "config", None), "offload_tokens", 0)
               for r in runs for res in r.results)


def _counts(policy: str, seqs: list[Seq], offload: bool = False) -> dict:
    """What happened to every request of the runs, warm-up and drain included; with a host
    offload tier, the prefix tokens it served."""
    done = rejected = running = preemptions = recomputed = hits = done_hits = offered = 0
    offloaded = done_offloaded = 0
    reasons = set()
    for s in seqs:  # one pass: every count is a sum of integers, the same in any order
        state = s.state
        preemptions += s.preemptions
        recomputed += s.recomputed_tokens
        hits += s.prefix_hit_tokens
        offloaded += s.offload_hit_tokens
        if state == DONE:
            done += 1
            offered += s.req.prefix_tokens
            done_hits += s.prefix_hit_tokens
            done_offloaded += s.offload_hit_tokens
        elif state == REJECTED:
            rejected += 1
            reasons.add(s.reason)
        elif state == RUNNING:
            running += 1
    return {
        "policy": policy, "offered": len(seqs), "completed": done,
        "rejected": rejected, "queued": len(seqs) - done - rejected,
        "running_at_end": running,
        "rejection_reasons": sorted(reasons),
        "preemptions": preemptions,
        "recomputed_tokens": recomputed,
        "prefix_hit_tokens": hits,
        "prefix_hit_rate": done_hits / offered if offered else 0.0,
    } | ({} if not offload else {
        "offload_hit_tokens": offloaded,
        "offload_hit_rate": done_offloaded / offered if offered else 0.0})


def _window(windows: list[Window]) -> dict:
    steady = all(w.steady for w in windows)
    reasons = sorted({w.reason for w in windows if w.reason})
    return {"steady_state": steady,
            "steady_state_reason": "; ".join(reasons) if reasons else None,
            "overloaded": any(w.overloaded for w in windows),
            "measured_requests": sum(w.num_measured for w in windows),
            "warmup_requests": sum(w.start for w in windows),
            "drain_requests": sum(w.num_requests - w.stop for w in windows),
            "window_lifetimes": round(min(w.lifetimes for w in windows), 3),
            "candidate_window_lifetimes": _least([w.candidate_lifetimes for w in windows]),
            "simulated_requests": max(w.num_requests for w in windows),
            "num_runs": len(windows)}


def _least(values: list[float | None]) -> float | None:
    """The smallest of the runs' figures, rounded; None when no run has one."""
    known = [v for v in values if v is not None]
    return round(min(known), 3) if known else None


class _Rows:
    """One pass over a batch's requests: its latencies (seconds; numpy columns of the floats
    the pass computed, for the intervals' sorts) and its counts."""

    def __init__(self, seqs: list[Seq], slo: SLO) -> None:
        self.count = len(seqs)
        queue, ttft, tpots, e2es = [], [], [], []
        self.met = self.met_ttft = self.met_tpot = self.prompt = self.output = 0
        ttft_s, tpot_limit, e2e_s = slo.ttft_s, slo.itl_s, slo.e2e_s
        for seq in seqs:
            if seq.state != DONE:
                continue
            req = seq.req
            first_s = seq.prefill_token_s[0]
            first = first_s - req.arrival_s
            n = req.output_tokens  # metrics.tpot_s, inline: one call less per request
            tpot = (seq.last_token_s - first_s) / (n - 1) if n > 1 else 0.0
            e2e = seq.release_s - req.arrival_s
            queue.append(seq.admitted_s - req.arrival_s)
            ttft.append(first)
            if n > 1:
                tpots.append(tpot)
            e2es.append(e2e)
            self.prompt += req.prompt_tokens
            self.output += req.output_tokens
            ok_ttft = ttft_s is None or first <= ttft_s
            ok_tpot = tpot_limit is None or tpot <= tpot_limit
            self.met_ttft += ok_ttft
            self.met_tpot += ok_tpot
            self.met += ok_ttft and ok_tpot and (e2e_s is None or e2e <= e2e_s)
        self.queue, self.ttft, self.tpot, self.e2e = map(floats, (queue, ttft, tpots, e2es))

    @property
    def done(self) -> int:
        return len(self.e2e)


def _rates(rows: list[_Rows], batches: list[Batch]) -> dict:
    """Requests/s, tokens/s, goodput and attainment over the windows' arrival spans."""
    span = max(sum(b.duration_s for b in batches), 1e-12)  # the windows' seconds
    count = sum(r.count for r in rows)
    done, met = sum(r.done for r in rows), sum(r.met for r in rows)
    out = {"duration_s": round(span, 6),
           "achieved_rps": done / span,
           "input_tokens_per_s": sum(r.prompt for r in rows) / span,
           "output_tokens_per_s": sum(r.output for r in rows) / span,
           "slo_attainment": met / count if count else 0.0,
           "goodput_rps": met / span,
           "ttft_attainment": sum(r.met_ttft for r in rows) / count if count else 0.0,
           "tpot_attainment": sum(r.met_tpot for r in rows) / count if count else 0.0}
    seconds = [b.duration_s for b in batches]
    per = {"achieved_rps": [r.done for r in rows], "goodput_rps": [r.met for r in rows],
           "output_tokens_per_s": [r.output for r in rows]}
    for key in RATE_CIS:
        out[f"{key}_ci"] = ratio_interval(per[key], seconds)
    out["slo_attainment_ci"] = share_interval(
        out["slo_attainment"], [r.met / r.count for r in rows], count)
    return out


def _offered(runs: list[Run], windows: list[Window]) -> float | None:
    """Arrivals per second of the measured requests: (n - 1) over their arrival span, over
    every run; None when they all arrive at once."""
    gaps = span = 0.0
    for run, win in zip(runs, windows, strict=True):
        seqs = run.seqs[win.start:win.stop]
        if len(seqs) > 1:
            gaps += len(seqs) - 1
            span += seqs[-1].req.arrival_s - seqs[0].req.arrival_s
    return gaps / span if span > 0 else None


def _latency(rows: list[_Rows], batches: list[Batch], extra: tuple[float, ...],
             itl: bool) -> dict:
    """Each latency's percentiles over the measured requests (ms), and p50/p99 intervals."""
    out = {}
    for key in LATENCY:
        if key == "itl_ms":
            if not itl:
                continue
            whole, shares = _gaps(batches)
        else:
            name = key[:-3]
            parts = [Sorted.of_values(getattr(r, name)) for r in rows]
            # the batches' sorted runs in batch order: the same list as sorting the values
            # in that order (a stable sort keeps equals in it), a merge of 10 runs for sorted()
            whole = Sorted.of_values(np.concatenate([p.values for p in parts]))
            shares = sorted_shares(parts)
        out[key] = _ms(_stats(whole, extra))
        out[f"{key}_ci"] = {name: _ms_pair(quantile_interval(whole, shares, q))
                            for name, q in CI_QUANTILES}
    return out


def _gaps(batches: list[Batch]) -> tuple[Gaps, Callable[[float], list[float]]]:
    """Every measured request's token gaps, and each batch's share at or below a value."""
    timelines = batches[0].timelines if batches else {}
    for batch in batches[1:]:
        if batch.timelines is not timelines:
            timelines = {k: v for b in batches for k, v in b.timelines.items()}
            break
    per_batch = BatchGaps([b.seqs for b in batches], timelines)
    whole = per_batch.gaps()
    found: dict[float, list[float]] = {}

    def shares(value: float) -> list[float]:
        if value not in found:
            found[value] = [below / count for below, count in per_batch.shares(value)
                            if count]
        return found[value]
    return whole, shares


def _stats(whole: Sorted, extra: tuple[float, ...]) -> dict:
    """p50/p95/p99, the mean, the extra percentiles and the max (with extras), as
    metrics.weighted_quantiles gives them."""
    wanted = list(QUANTILES) + [(percentile_key(p), p / 100) for p in extra
                                if percentile_key(p) not in dict(QUANTILES)]
    keys = [name for name, _ in wanted] + ["mean"] + (["max"] if extra else [])
    if not whole.total:
        return dict.fromkeys(keys)
    out = {name: whole.quantile(q) for name, q in wanted}
    out["mean"] = whole.mean()
    if extra:
        out["max"] = whole.max()
    return {k: out[k] for k in keys}


def _ms(stats: dict) -> dict:
    return {k: None if v is None else round(v * 1000, 3) for k, v in stats.items()}


def _ms_pair(pair: list[float] | None) -> list[float] | None:
    return None if pair is None else [None if v is None else round(v * 1000, 3) for v in pair]
