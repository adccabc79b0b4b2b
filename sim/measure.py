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

from .columns import RequestColumns
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
from .seq import STATES
from .state import REJECTED, RUNNING, Seq, SimResult
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
    columns: RequestColumns | None = None  # seqs' columns, where the run built them


@dataclass(frozen=True)
class Batch:
    """Consecutive measured requests of one run and the seconds of arrivals they span."""

    seqs: list[Seq]
    duration_s: float
    timelines: dict
    columns: RequestColumns  # the same requests' columns


def measure(policy: str, runs: list[Run], slo: SLO, itl: bool = True,
            window: bool = True, columns: list[RequestColumns] | None = None) -> dict:
    """The summary over every run's measured window (the keys of metrics.summarize_seqs,
    plus the window and the *_ci intervals). itl=False leaves the per-token ITL out (a
    search reads TPOT); window=False measures every request (what a benchmark of the same
    requests reports), still saying whether a steady state was reached. columns: each run's
    RequestColumns, where the caller has them."""
    if columns is None:  # each run's requests read once (the caller's, where it has them)
        columns = [RequestColumns(r.seqs) for r in runs]
    windows = [find_window(r.seqs, r.results, c) for r, c in zip(runs, columns, strict=True)]
    if not window:
        windows = [whole_run(r.seqs, w, c) for r, w, c in zip(runs, windows, columns,
                                                               strict=True)]
    batches = [b for r, w, c in zip(runs, windows, columns, strict=True)
               for b in _batches(r, w, itl, c)]
    report = _counts(policy, runs, columns, _has_offload(runs)) | _window(windows)
    rows = [_Rows(b.columns, slo) for b in batches]
    report |= {"offered_rps": _offered(runs, windows)} | _rates(rows, batches)
    report |= _latency(rows, batches, slo.percentiles, itl)
    report["percentile_method"] = PERCENTILE_METHOD
    return report


def _batches(run: Run, window: Window, itl: bool, columns: RequestColumns) -> list[Batch]:
    """NUM_BATCHES consecutive batches of the window, each with its share of the window's
    seconds (its arrival span; the last closed one mean gap after its last arrival)."""
    seqs = run.seqs[window.start:window.stop]
    if not seqs:
        return []
    timelines = _timelines(run.results) if itl else {}
    edges = batch_bounds(len(seqs))
    opens = [seqs[e].req.arrival_s for e in edges[:-1]]
    gap = (seqs[-1].req.arrival_s - seqs[0].req.arrival_s) / (len(seqs) - 1) \
        if len(seqs) > 1 else 0.0
    spans = [b - a for a, b in zip(opens, opens[1:] + [seqs[-1].req.arrival_s + gap],
                                   strict=True)]
    total = sum(spans)
    scale = [s / total * window.duration_s for s in spans] if total > 0 else \
        [window.duration_s / len(spans)] * len(spans)
    return [Batch(seqs[edges[i]:edges[i + 1]], scale[i], timelines,
                  columns.part(window.start + edges[i], window.start + edges[i + 1]))
            for i in range(len(edges) - 1)]


def _timelines(results: list) -> dict:
    """id(request) -> its engine's decode timeline, for every request of every engine (a
    later engine's where one appears twice): each engine's keys put in by dict.fromkeys, in
    C, where a comprehension made a Python step per request."""
    if len(results) == 1:
        return dict.fromkeys(map(id, results[0].seqs), results[0].decode_end_s)
    out: dict = {}
    for res in results:
        out.update(dict.fromkeys(map(id, res.seqs), res.decode_end_s))
    return out


def _has_offload(runs: list[Run]) -> bool:
    """Whether any run's engine had a host KV offload tier; a measured server's stand-in
    (load/steady.py) carries no engine config and has none."""
    return any(getattr(getattr(res, "config", None), "offload_tokens", 0)
               for r in runs for res in r.results)


def _counts(policy: str, runs: list[Run], columns: list[RequestColumns],
            offload: bool = False) -> dict:
    """What happened to every request of the runs, warm-up and drain included; with a host
    offload tier, the prefix tokens it served. Every count is a sum of integers, the same in
    any order: summed on the columns."""
    done = rejected = running = preemptions = recomputed = hits = done_hits = offered = 0
    offloaded = done_offloaded = count = 0
    reasons = set()
    for run, cols in zip(runs, columns, strict=True):
        fin, states = cols.done, cols.states
        count += len(cols)
        preemptions += int(cols.preemptions.sum())
        recomputed += int(cols.recomputed.sum())
        hits += int(cols.hit.sum())
        offloaded += int(cols.offload.sum())
        done += int(fin.sum())
        offered += int(cols.prefix[fin].sum())
        done_hits += int(cols.hit[fin].sum())
        done_offloaded += int(cols.offload[fin].sum())
        refused = np.flatnonzero(states == STATES.index(REJECTED)).tolist()
        rejected += len(refused)
        reasons.update(run.seqs[i].reason for i in refused)
        running += int((states == STATES.index(RUNNING)).sum())
    return {
        "policy": policy, "offered": count, "completed": done,
        "rejected": rejected, "queued": count - done - rejected,
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
    """A batch's latencies (seconds; numpy columns, for the intervals' sorts) and counts, from
    its requests' columns: each latency the same IEEE operation per completed request that
    a loop over them made, in the same order."""

    def __init__(self, cols: RequestColumns, slo: SLO) -> None:
        self.count = len(cols)
        done = cols.done
        arrival, first_s = cols.arrival[done], cols.first[done]
        n = cols.output[done]
        many = n > 1
        first = first_s - arrival
        # metrics.tpot_s per request: 0.0 for a single token
        tpot = np.zeros(len(n))
        tpot[many] = (cols.last[done][many] - first_s[many]) / (n[many] - 1)
        e2e = cols.release[done] - arrival
        self.queue, self.ttft, self.tpot, self.e2e = cols.admitted[done] - arrival, first, \
            tpot[many], e2e
        self.prompt, self.output = int(cols.prompt[done].sum()), int(n.sum())
        ok_ttft = _within(first, slo.ttft_s)
        ok_tpot = _within(tpot, slo.itl_s)
        met = ok_ttft & ok_tpot & _within(e2e, slo.e2e_s)
        self.met_ttft, self.met_tpot, self.met = (int(np.count_nonzero(ok))
                                                  for ok in (ok_ttft, ok_tpot, met))

    @property
    def done(self) -> int:
        return len(self.e2e)


def _within(values: np.ndarray, limit: float | None) -> np.ndarray:
    """Each value at or below the limit (every one without a limit)."""
    return np.ones(len(values), dtype=bool) if limit is None else values <= limit


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
            # in that order (a stable sort keeps equals in it; columns.stable_sort)
            whole = Sorted.of_values(np.concatenate([p.values for p in parts]))
            shares = sorted_shares(parts)
        out[key] = _ms(_stats(whole, extra))
        out[f"{key}_ci"] = {name: _ms_pair(quantile_interval(whole, shares, q))
                            for name, q in CI_QUANTILES}
    return out


def _gaps(batches: list[Batch]) -> tuple[Gaps, Callable[[float], list[float]]]:
    """Every measured request's token gaps, and each batch's share at or below a value."""
    # each batch's requests looked up in their own run's dict (--seeds: no merged copy)
    per_batch = BatchGaps([b.seqs for b in batches], [b.timelines for b in batches])
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
