"""Token gaps (ITL) of a set of requests without a per-token list: nearest-rank quantiles
and each batch's share at or below a value, exact, in time linear in decode iterations.

A decode iteration j of an engine ends at ends[j]; every sequence that stepped in j - 1 and
j saw the gap ends[j] - ends[j - 1], so iteration j is one gap value counted W[j] times
(metrics.itl_pairs). Gaps are grouped by their count and each group sorted once; a quantile
is then found by bisection on the value, counting sum over groups of count x (gaps at or
below), down to adjacent floats, so it is a sample value exactly as a sort of every token
gap would give it. A batch's share at or below x comes from prefix counts of the gaps at or
below x along each timeline.

The grouping, the sorts and the prefix counts run on numpy arrays (one pass each over a
run's million iterations rather than a Python loop), and the groups stay numpy arrays: the
quantile's bisection counts with one searchsorted over all of them, the mean adds each
group left to right (sim/columns.py) and the max is a group's last value, the same floats
Python lists of the gaps gave.
"""

import math

import numpy as np

from .columns import as_column, float_sort_kind, seq_sum
from .state import Seq, segment_columns


class Gaps:
    """Every token gap of `seqs` (each with the decode timeline it indexes)."""

    def __init__(self, seqs: list[Seq], timelines: dict[int, list[float]],
                 parts: "list[_Part] | None" = None) -> None:
        if parts is None:
            arrays: dict[int, tuple] = {}
            parts = [_Part(arrays, *line) for line in _by_timeline(seqs, timelines)]
        lines: dict[int, list[_Part]] = {}
        for part in parts:
            lines.setdefault(id(part.ends), []).append(part)
        singles = [a for p in parts for a in (p.heads, p.extras)]
        # a segment's first gap and re-prefill gaps are counted once; count 1 comes first
        weights = [np.ones(sum(map(len, singles)), dtype=np.uint8)]
        lives, steps = [], []
        for same in lines.values():
            firsts = np.concatenate([p.firsts for p in same])
            lasts = np.concatenate([p.lasts for p in same])
            count = _weights(len(same[0].ends), firsts, lasts)
            live = count != 0
            weights.append(count[live])
            lives.append(live)
            steps.append(same[0].steps)
        # the gaps written once into their column: the live steps compressed into place, no
        # column of them beside the concatenation
        values = np.empty(sum(map(len, weights)), dtype=np.float64)
        at = len(weights[0])
        if singles:
            np.concatenate(singles, out=values[:at])
        for live, line in zip(lives, steps, strict=True):
            size = np.count_nonzero(live)
            _compress_into(live, line, values[at:at + size])
            at += size
        self._group(*_grouped(_counts_column(weights), values))

    def _group(self, groups: "list[tuple[int, np.ndarray]]",
               keys: "np.ndarray | None" = None) -> None:
        """Hold (count, sorted gaps) groups (_groups) and index them for counting."""
        self.groups = groups
        self.total = sum(w * len(v) for w, v in self.groups)
        # every group's sorted gaps in one complex column, (group, gap): numpy orders complex
        # numbers by real part, then imaginary, so one searchsorted of (g, value) for every g
        # counts each group's gaps at or below value, as a bisect_right on each group would
        self._weights = np.array([w for w, _ in self.groups], dtype=np.int64)
        sizes = np.array([len(v) for _, v in self.groups], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(sizes) else sizes
        if keys is None:
            keys = np.empty(int(sizes.sum()), dtype=np.complex128)
            real, imag = keys.real, keys.imag
            for g, (start, (_, values)) in enumerate(zip(self._starts.tolist(), self.groups,
                                                         strict=True)):
                real[start:start + len(values)] = g
                imag[start:start + len(values)] = values
        self._keys = keys
        self._probe = np.empty(len(sizes), dtype=np.complex128)
        self._probe.real = np.arange(len(sizes), dtype=np.float64)

    def at_or_below(self, value: float) -> int:
        self._probe.imag = value
        below = self._keys.searchsorted(self._probe, side="right") - self._starts
        return int(below @ self._weights)

    def quantile(self, share: float) -> float | None:
        """The smallest gap with at least share x total gaps at or below it."""
        if not self.total:
            return None
        rank = max(1, math.ceil(round(min(max(share, 0.0), 1.0) * self.total, 6)))
        low = float(min(v[0] for _, v in self.groups))
        high = float(max(v[-1] for _, v in self.groups))
        if self.at_or_below(low) >= rank:
            return low
        while True:  # count(low) < rank <= count(high); stop at adjacent floats
            mid = (low + high) / 2
            if mid in (low, high):
                return high
            if self.at_or_below(mid) >= rank:
                high = mid
            else:
                low = mid

    def mean(self) -> float | None:
        """Each group's gaps summed left to right, as the lists' sum() added them."""
        return sum(w * seq_sum(v) for w, v in self.groups) / self.total if self.total \
            else None

    def max(self) -> float | None:
        return float(max(v[-1] for _, v in self.groups)) if self.total else None


class _Part:
    """Some requests' share of one decode timeline: their segments' first and last
    iterations, each segment's first gap (ends[first] - the token before it) and their
    re-prefill gaps; the timeline's arrays are built once per `arrays` cache."""

    def __init__(self, arrays: dict[int, tuple], ends: list[float], firsts: np.ndarray,
                 lasts: np.ndarray, prevs: np.ndarray, extras: np.ndarray) -> None:
        known = arrays.get(id(ends))
        if known is None:
            line = np.array(ends, dtype=np.float64)
            known = arrays[id(ends)] = (line, line[1:] - line[:-1])
        line, self.steps = known
        self.ends = ends
        self.firsts, self.lasts = firsts, lasts
        self.heads = line[firsts] - prevs
        self.extras = extras
        self.count = int((lasts - firsts).sum()) + len(firsts) + len(extras)


def _by_timeline(seqs: list[Seq], timelines: dict[int, list[float]]) -> list[tuple]:
    """(decode timeline, its requests' segments' first and last iterations and the token
    time before each, their re-prefill gaps) per timeline, in the order the requests first
    index them: state.segment_columns' one pass over the requests (in C where compiled),
    split by timeline on the columns."""
    lines, seg_line, firsts, lasts, prevs, extra_line, extras = segment_columns(
        seqs, timelines)
    firsts, lasts, prevs, extras = map(as_column, (firsts, lasts, prevs, extras))
    if len(lines) == 1:
        return [(lines[0], firsts, lasts, prevs, extras)]
    seg_line, extra_line = as_column(seg_line), as_column(extra_line)
    return [(ends, firsts[seg_line == k], lasts[seg_line == k], prevs[seg_line == k],
             extras[extra_line == k]) for k, ends in enumerate(lines)]


_CHUNK = 1 << 16  # steps per boolean index in _compress_into (512 KiB of gaps)


def _compress_into(flags: np.ndarray, column: np.ndarray, out: np.ndarray) -> None:
    """np.compress(flags, column, out=out): where nearly every flag is set (a busy run's
    steps: the few unset are iterations without a decode), numpy's boolean index copies the
    runs between them in half of compress's time, a chunk at a time (no column of them
    beside out); else compress, faster on a mixed mask."""
    if len(out) * 8 <= len(column) * 7:
        np.compress(flags, column, out=out)
        return
    at = 0
    for start in range(0, len(column), _CHUNK):
        part = column[start:start + _CHUNK][flags[start:start + _CHUNK]]
        out[at:at + len(part)] = part
        at += len(part)


def _weights(num_ends: int, firsts: np.ndarray, lasts: np.ndarray) -> np.ndarray:
    """How many segments hold iterations j - 1 and j, for the gap ending each iteration
    j >= 1 (gaps[j - 1])."""
    size = max(num_ends, int(lasts.max()) + 1 if len(lasts) else 0) + 1
    diff = np.bincount(firsts + 1, minlength=size)
    diff -= np.bincount(lasts + 1, minlength=size)
    counts = np.cumsum(diff, out=diff)[1:num_ends]  # in place: one column of a run's million
    # the counts in the narrowest type that holds them (_counts_column), the 64-bit tally freed
    return counts.astype(_count_type(int(counts.min()), int(counts.max()))) if len(counts) \
        else counts


def _groups(weights: np.ndarray, values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(w, the gaps counted w times, sorted) per count: count 1 first, then in the order each
    count first appears (the order the groups' sums add up in the mean)."""
    return _grouped(_counts_column([weights]), values)[0]


def _counts_column(pieces: list[np.ndarray]) -> np.ndarray:
    """The counts in one column of the narrowest type that holds them, concatenated straight
    into it: a stable argsort is one order whatever the key's width, and numpy's radix sort
    of 8-bit keys (every batch up to 255 sequences) makes one pass over a run's million
    counts, of 16-bit keys two (1.6x the time), of wider ones a merge sort (7x); no 64-bit
    column of them is paged in."""
    pieces = [p for p in pieces if len(p)]
    dtype = _count_type(min((int(p.min()) for p in pieces), default=0),
                        max((int(p.max()) for p in pieces), default=0))
    return np.concatenate(pieces, dtype=dtype, casting="unsafe") if pieces \
        else np.zeros(0, dtype=dtype)


def _count_type(low: int, high: int) -> type:
    """8-bit where the counts are 0..255, 16-bit to 2^15 - 1, else 64-bit."""
    return np.int64 if low < 0 or high >= 2**15 else np.uint8 if high < 2**8 else np.int16


def _grouped(weights: np.ndarray, values: np.ndarray) -> tuple[list, np.ndarray]:
    """_groups' groups and Gaps' complex column of them, (group, gap), built together: each
    group's gaps are gathered, sorted and written into the column's imaginary part, and the
    group is a view of its place there; no sorted copy of the counts, of the gaps in count
    order or of each group is kept beside the column (three fewer columns of a run's million
    gaps paged in)."""
    keys = np.empty(len(values), dtype=np.complex128)
    if not len(weights):
        return [], keys
    order = np.argsort(weights, kind="stable")
    if weights.dtype == np.int64:
        ranked = weights[order]
        starts = np.concatenate(([0], np.flatnonzero(ranked[1:] != ranked[:-1]) + 1))
        counts = ranked[starts]
        sizes = np.diff(np.concatenate((starts, [len(ranked)])))
    else:  # narrow, non-negative counts: how many of each, straight from a tally
        tally = np.bincount(weights)
        counts = np.flatnonzero(tally)
        sizes = tally[counts]
        starts = np.cumsum(sizes) - sizes
    first_seen = order[starts]  # stable: each count's first position in the input
    first_seen[counts == 1] = -1
    kind = float_sort_kind(values)
    real, imag = keys.real, keys.imag
    out, at = [], 0
    for g, i in enumerate(np.argsort(first_seen, kind="stable").tolist()):
        start, size = int(starts[i]), int(sizes[i])
        chunk = values[order[start:start + size]]
        chunk.sort(kind=kind)
        real[at:at + size] = g
        imag[at:at + size] = chunk
        out.append((int(counts[i]), imag[at:at + size]))
        at += size
    return out, keys


class BatchGaps:
    """Each batch's token gaps as arrays, built in one pass over the requests: per batch, its
    share of each timeline; shares(value) then counts each batch's gaps at or below a value
    from prefix counts along each timeline, and gaps() is every batch's gaps together."""

    def __init__(self, batches: list[list[Seq]],
                 timelines: dict[int, list[float]] | list[dict[int, list[float]]]) -> None:
        """timelines: id(request) -> its decode timeline, one dict for every batch or each
        batch's own (a dict holding at least its requests: a run's, where batches of
        several runs are measured together)."""
        self.arrays: dict[int, tuple] = {}
        lookups = timelines if isinstance(timelines, list) else [timelines] * len(batches)
        self.batches = [[_Part(self.arrays, *line) for line in _by_timeline(seqs, found)]
                        for seqs, found in zip(batches, lookups, strict=True)]

    def gaps(self) -> Gaps:
        return Gaps([], {}, [p for parts in self.batches for p in parts])

    def shares(self, value: float) -> list[tuple[int, int]]:
        """(gaps at or below value, gaps) of each batch."""
        prefix = {k: _prefix_counts(steps <= value) for k, (_, steps) in self.arrays.items()}
        out = []
        for parts in self.batches:
            below = count = 0
            for p in parts:
                line = prefix[id(p.ends)]
                below += int((line[p.lasts] - line[p.firsts]).sum()) \
                    + int(np.count_nonzero(p.heads <= value)) \
                    + int(np.count_nonzero(p.extras <= value))
                count += p.count
            out.append((below, count))
        return out


def _prefix_counts(flags: np.ndarray) -> np.ndarray:
    """[0, cumsum(flags)...]: the running count written once into its column (no
    concatenation of a run's million counts after the sum), 32-bit where the count fits
    (a third of the 64-bit sum's time from booleans: the same integers, and numpy sums
    32-bit differences into a 64-bit total)."""
    dtype = np.int32 if len(flags) < 2**31 - 1 else np.int64
    out = np.empty(len(flags) + 1, dtype=dtype)
    out[0] = 0
    np.cumsum(flags.view(np.uint8), out=out[1:])
    return out


def batch_shares(batches: list[list[Seq]], timelines: dict[int, list[float]],
                 value: float) -> list[tuple[int, int]]:
    """(gaps at or below value, gaps) of each batch of requests."""
    return BatchGaps(batches, timelines).shares(value)
