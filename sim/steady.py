"""Steady state from the run itself: MSER-5 finds the warm-up, the drain is cut, the rest is
the measured window.

A run starts empty (the first requests find no queue) and ends draining (the last ones find
no one behind them); both are kinder than the steady state a deployment runs in. So:

1. Warm-up, by MSER-5 (White 1997, "An effective truncation heuristic for bias reduction in
   simulation output", Simulation 69(6); White, Cobb & Spratt 2000, "A comparison of five
   steady-state truncation heuristics for simulation", Proc. Winter Simulation Conference;
   Hoad, Robinson & Davies 2010 found it the most reliable of the automated rules). Two
   series are read at each request's arrival, in arrival order: the requests in the system
   (queued or running) and the KV blocks in use. Each is cut into batches of 5 with means
   Z_1..Z_k; deleting the first d batches leaves MSER(d) = sum_{j>d} (Z_j - mean_d)^2 /
   (k - d)^2, and the warm-up is the d (over the first three quarters of the batches: the
   statistic is erratic over the last few) that minimises it, taken on
   whichever series needs the longer one. A minimum in the second half of the run means the
   series never settled: no steady state.
2. Drain: once the arrivals stop (the last arrival), load falls. Measured requests are the
   ones that arrived after the warm-up and before the first request still in the system at
   the last arrival, so every one of them was served while requests kept arriving, and none
   is left out for being slow (a prefix in arrival order, not a filter on finishing).
3. A window is steady when the warm-up ends in the first half, at least MIN_MEASURED
   requests remain, and the window spans MIN_LIFETIMES request lifetimes (its arrival span
   over the mean end-to-end latency of its requests), so each of its NUM_BATCHES batch-means
   batches spans about one lifetime or more. Otherwise every request is measured (what a run
   without the window would report) and the window says why it is not steady.
"""

from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter

import numpy as np

from servecap.ledger.units import plural

from .columns import RequestColumns, floats, seq_sum
from .intervals import NUM_BATCHES
from .state import DONE, REJECTED, Seq, SimResult, kv_columns

MSER_BATCH = 5
MSER_MIN_TAIL_BATCHES = 5
MSER_TAIL_SHARE = 0.25  # MSER's statistic is erratic on its last batches: not searched there
MIN_MEASURED = 100
MIN_LIFETIMES = NUM_BATCHES
GROWING = 2.0  # backlog in the last quarter over the second: a queue growing without bound
GROWING_SHARE = 0.1  # ... by at least this share of the arrivals in between
GROWING_LIFETIMES = 8  # ... over a run long enough to be past its warm-up


@dataclass(frozen=True)
class Window:
    """The measured requests [start, stop) in arrival order, and whether they are steady."""

    start: int
    stop: int
    steady: bool
    reason: str  # why not steady; "" when steady
    overloaded: bool  # the queue grew through the run: longer runs only make it worse
    num_requests: int
    duration_s: float  # the measured requests' arrival span (every request: first arrival
    # to last release)
    lifetimes: float  # the measured requests' arrival span over their mean end-to-end latency
    candidate_lifetimes: float | None = None  # the same of the candidate window (after the
    # warm-up and the drain: the measured requests when steady); None: no warm-up was found

    @property
    def num_measured(self) -> int:
        return self.stop - self.start


def mser5(series: list[float] | np.ndarray) -> int | None:
    """Observations to delete as warm-up (a multiple of 5), or None when the minimum lies
    in the second half (the series is still trending). series: a list, or a column."""
    k = len(series) // MSER_BATCH
    if k < 2 * MSER_MIN_TAIL_BATCHES:
        return None
    column = np.asarray(series)
    if column.dtype.kind != "i":
        return _mser5_floats(series, k)
    # counts: each batch's sum is exact, its mean the same float as sum(batch) / 5
    z = column[:k * MSER_BATCH].reshape(k, MSER_BATCH).sum(axis=1) / MSER_BATCH
    # the suffix sums from the last batch back, each partial sum carried into the next as
    # the loop of _mser5_floats adds them; MSER(d) for every d at once
    back = z[::-1]
    total, squares = np.add.accumulate(back), np.add.accumulate(back * back)
    m = np.arange(1, k + 1)
    stat = (squares - total * total / m) / (m * m)
    last = min(k - MSER_MIN_TAIL_BATCHES, int(k * (1 - MSER_TAIL_SHARE)))
    searched = stat[k - 1 - last:]  # d = last down to 0
    # the smallest d of the least statistic: the last of its equals in this order
    best_d = last - int(np.flatnonzero(searched == searched.min())[-1])
    return None if best_d > k // 2 else best_d * MSER_BATCH


def _mser5_floats(series: list[float], k: int) -> int | None:
    z = [sum(series[i * MSER_BATCH:(i + 1) * MSER_BATCH]) / MSER_BATCH for i in range(k)]
    best, best_d, total, squares = None, 0, 0.0, 0.0
    last = min(k - MSER_MIN_TAIL_BATCHES, int(k * (1 - MSER_TAIL_SHARE)))
    for d in range(k - 1, -1, -1):  # suffix sums: MSER(d) for every d in one pass
        total += z[d]
        squares += z[d] * z[d]
        if d > last:
            continue
        m = k - d
        stat = (squares - total * total / m) / (m * m)
        if best is None or stat <= best:
            best, best_d = stat, d
    return None if best_d > k // 2 else best_d * MSER_BATCH


class _Columns:
    """The fields the window reads of every request, each read once: arrival, release (NaN:
    never released) and whether it completed; a RequestColumns' own columns where the caller
    has them (a run's requests), else read here (any objects with those fields)."""

    def __init__(self, seqs: list[Seq], columns: RequestColumns | None = None) -> None:
        self.seqs = seqs
        if columns is not None:
            self.arrival, self.release = columns.arrival, columns.release
            self.__dict__["done"] = columns.done  # the cached_property's value
            return
        self.arrival = floats([s.req.arrival_s for s in seqs])
        release = [s.release_s for s in seqs]
        try:
            self.release = floats(release)
        except TypeError:  # None (never released): NaN, np.array looking at every element
            self.release = np.array(release, dtype=np.float64)

    @cached_property
    def done(self) -> np.ndarray:
        return np.fromiter(map(DONE.__eq__, map(_STATE, self.seqs)), dtype=bool,
                           count=len(self.seqs))


_STATE = attrgetter("state")


def in_system(seqs: list[Seq], columns: _Columns | None = None) -> list[int]:
    """Requests in the system (arrived, not yet released) at each request's arrival; a
    request never released counts as in the system to the end."""
    return _in_system(seqs, columns).tolist()


def _in_system(seqs: list[Seq], columns: _Columns | None = None) -> np.ndarray:
    """in_system as a column of 64-bit counts (what mser5 and _growing read: no list of a
    run's counts made and read back)."""
    if columns is None:
        columns = _Columns(seqs)
    release = columns.release
    releases = np.sort(release[~np.isnan(release)])
    # bisect_right of each arrival in the sorted releases, all at once (counts, not floats)
    released = np.searchsorted(releases, columns.arrival, side="right")
    return np.maximum(np.arange(len(seqs)) - released, 0)


def kv_in_use(seqs: list[Seq], results: list[SimResult],
              arrivals: np.ndarray | None = None) -> np.ndarray:
    """KV blocks in use over every engine at each request's arrival (the last iteration that
    started by then), a column of 64-bit counts."""
    out = np.zeros(len(seqs), dtype=np.int64)
    for res in results:
        times, _, blocks = kv_columns(res.kv_samples)
        if not len(times):
            continue
        if arrivals is None:
            arrivals = np.array([s.req.arrival_s for s in seqs], dtype=np.float64)
        # bisect_right of each arrival in the sample times, all at once
        at = np.searchsorted(np.asarray(times, dtype=np.float64), arrivals, side="right")
        out = out + np.asarray(blocks, dtype=np.int64)[np.maximum(at - 1, 0)] * (at > 0)
    return out


def find_window(seqs: list[Seq], results: list[SimResult],
                request_columns: RequestColumns | None = None) -> Window:
    """The measured window of a run whose requests `seqs` are in arrival order (and their
    columns, where the caller has them)."""
    count = len(seqs)
    columns = _Columns(seqs, request_columns)
    load = _in_system(seqs, columns)
    cuts = [mser5(load), mser5(kv_in_use(seqs, results, columns.arrival))]
    stop = _drain_cut(seqs, columns)
    growing = _growing(load, seqs)
    if None in cuts:
        return _whole(seqs, "warm-up still trending at the end of the run"
                      if count >= 2 * MSER_BATCH * MSER_MIN_TAIL_BATCHES else
                      f"{plural(count, 'request')}: too few to find a warm-up", growing,
                      columns=columns)
    start = max(cuts)
    duration, lifetimes = _span(seqs, start, stop, columns)
    if stop - start < MIN_MEASURED:
        return _whole(seqs, f"{plural(max(stop - start, 0), 'request')} left after the warm-up "
                      f"({start}) and the drain ({count - stop}); at least {MIN_MEASURED} "
                      "needed", growing, candidate=lifetimes, columns=columns)
    if lifetimes < MIN_LIFETIMES:
        return _whole(seqs, f"the candidate window after the warm-up and the drain, "
                      f"requests {start + 1:,}-{stop:,} of {count:,}, spans {lifetimes:.1f} "
                      f"request lifetimes; at least {MIN_LIFETIMES} needed", growing,
                      candidate=lifetimes, columns=columns)
    return Window(start, stop, True, "", False, count, duration, lifetimes, lifetimes)


def whole_run(seqs: list[Seq], found: Window,
              request_columns: RequestColumns | None = None) -> Window:
    """Every request measured, with what find_window said of the run."""
    return _whole(seqs, found.reason, found.overloaded, found.steady,
                  found.candidate_lifetimes, _Columns(seqs, request_columns))


def _whole(seqs: list[Seq], reason: str, growing: bool, steady: bool = False,
           candidate: float | None = None, columns: _Columns | None = None) -> Window:
    """Every request measured over the run's span, first arrival to last release (as a
    benchmark of the same requests measures it); `candidate`: the lifetimes of the window
    find_window considered, if any."""
    start = min((s.req.arrival_s for s in seqs), default=0.0)
    end = max((s.release_s for s in seqs if s.state == DONE), default=start)
    return Window(0, len(seqs), steady, reason, growing, len(seqs), max(end - start, 1e-12),
                  _span(seqs, 0, len(seqs), columns or _Columns(seqs))[1], candidate)


def _drain_cut(seqs: list[Seq], columns: _Columns) -> int:
    """The first request (in arrival order) still in the system at the last arrival."""
    if not seqs:
        return 0
    last = seqs[-1].req.arrival_s
    release = columns.release
    for i in np.flatnonzero(np.isnan(release) | (release > last)).tolist():
        if seqs[i].state != REJECTED:
            return i
    return len(seqs)


def _span(seqs: list[Seq], start: int, stop: int, columns: _Columns) -> tuple[float, float]:
    """(arrival span in seconds, that span over the mean end-to-end latency) of the requests
    [start, stop): n requests span n gaps, so the span of their arrivals is stretched by
    n / (n - 1)."""
    n = max(stop - start, 0)
    if n < 2:
        return 0.0, 0.0
    arrival = columns.arrival[start:stop]
    done = columns.done[start:stop]
    e2e = (columns.release[start:stop] - arrival)[done]  # summed in arrival order
    duration = (seqs[stop - 1].req.arrival_s - seqs[start].req.arrival_s) * n / (n - 1)
    lifetime = seq_sum(e2e) / len(e2e) if len(e2e) else 0.0
    return duration, duration / lifetime if lifetime > 0 else 0.0


def _growing(load: np.ndarray, seqs: list[Seq]) -> bool:
    """A queue that grows for as long as requests arrive: the mean backlog over the last
    quarter of the arrivals is GROWING x the second quarter's, and larger by GROWING_SHARE of
    the arrivals between them (completions fall at least that far behind arrivals), in a run
    whose arrivals span GROWING_LIFETIMES lifetimes of its first quarter's requests (a
    shorter run may still be warming up: its backlog grows either way)."""
    quarter = len(load) // 4
    if quarter < MSER_BATCH:
        return False
    # the counts' sums are exact integers in any order: on the column
    second = int(load[quarter:2 * quarter].sum()) / quarter
    last = int(load[3 * quarter:].sum()) / (len(load) - 3 * quarter)
    if not (last > GROWING * second and last - second > GROWING_SHARE * 2 * quarter):
        return False
    early = [s.release_s - s.req.arrival_s for s in seqs[:quarter] if s.state == DONE]
    lifetime = sum(early) / len(early) if early else 0.0
    return seqs[-1].req.arrival_s - seqs[0].req.arrival_s >= GROWING_LIFETIMES * lifetime
