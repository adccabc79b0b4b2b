"""Token gaps (ITL) of a set of requests without a per-token list: nearest-rank quantiles
and each batch's share at or below a value, exact, in time linear in decode iterations.

A decode iteration j of an engine ends at ends[j]; every sequence that stepped in j - 1 and
j saw the gap ends[j] - ends[j - 1], so iteration j is one gap value counted W[j] times
(metrics.itl_pairs). Gaps are grouped by their count and each group sorted once; a quantile
is then found by bisection on the value, counting sum over groups of count x (gaps at or
below), down to adjacent floats, so it is a sample value exactly as a sort of every token
gap would give it. A batch's share at or below x comes from prefix counts of the gaps at or
below x along each timeline.
"""

import math
from bisect import bisect_right
from itertools import accumulate
from operator import sub

from .state import Seq


class Gaps:
    """Every token gap of `seqs` (each with the decode timeline it indexes)."""

    def __init__(self, seqs: list[Seq], timelines: dict[int, list[float]]) -> None:
        lines: dict[int, tuple[list[float], list[Seq]]] = {}
        singles: list[float] = []  # gaps counted once: a segment's first, re-prefill gaps
        for seq in seqs:
            ends = timelines.get(id(seq))
            if ends is None:
                continue
            lines.setdefault(id(ends), (ends, []))[1].append(seq)
            singles.extend(ends[first] - prev for first, _, prev in seq.segments)
            singles.extend(seq.extra_gaps_s)
        self.lines = [(ends, list(map(sub, ends[1:], ends[:-1])), members)
                      for ends, members in lines.values()]
        groups: dict[int, list[float]] = {1: singles}
        for _, gaps, members in self.lines:
            _group(groups, gaps, members)
        self.groups = [(w, sorted(v)) for w, v in groups.items() if v]
        self.total = sum(w * len(v) for w, v in self.groups)

    def at_or_below(self, value: float) -> int:
        return sum(w * bisect_right(v, value) for w, v in self.groups)

    def quantile(self, share: float) -> float | None:
        """The smallest gap with at least share x total gaps at or below it."""
        if not self.total:
            return None
        rank = max(1, math.ceil(round(min(max(share, 0.0), 1.0) * self.total, 6)))
        low = min(v[0] for _, v in self.groups)
        high = max(v[-1] for _, v in self.groups)
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
        return sum(w * sum(v) for w, v in self.groups) / self.total if self.total else None

    def max(self) -> float | None:
        return max(v[-1] for _, v in self.groups) if self.total else None


def batch_shares(batches: list[list[Seq]], timelines: dict[int, list[float]],
                 value: float, gaps: "Gaps | None" = None) -> list[tuple[int, int]]:
    """(gaps at or below value, gaps) of each batch of requests (`gaps`: the same requests'
    Gaps, whose per-timeline gap lists are reused)."""
    known = {id(ends): line for ends, line, _ in gaps.lines} if gaps is not None else {}
    prefix: dict[int, list[int]] = {}
    out = []
    for seqs in batches:
        below = count = 0
        for seq in seqs:
            ends = timelines.get(id(seq))
            if ends is None:
                continue
            line = prefix.get(id(ends))
            if line is None:
                steps = known.get(id(ends)) or list(map(sub, ends[1:], ends[:-1]))
                line = prefix[id(ends)] = [0, *accumulate(map(value.__ge__, steps))]
            for first, last, prev in seq.segments:
                below += line[last] - line[first] + (ends[first] - prev <= value)
                count += last - first + 1
            below += sum(1 for g in seq.extra_gaps_s if g <= value)
            count += len(seq.extra_gaps_s)
        out.append((below, count))
    return out


def _group(groups: dict[int, list[float]], gaps: list[float], members: list[Seq]) -> None:
    """Extend groups[w] with the gaps counted w times: the count of iteration j is how many
    members' segments hold j - 1 and j, constant between segment edges (gaps[j - 1] ends
    iteration j)."""
    diff: dict[int, int] = {}
    for seq in members:
        for first, last, _ in seq.segments:
            diff[first + 1] = diff.get(first + 1, 0) + 1
            diff[last + 1] = diff.get(last + 1, 0) - 1
    marks = sorted(diff)
    weight = 0
    for a, b in zip(marks, marks[1:], strict=False):
        weight += diff[a]
        if weight:
            groups.setdefault(weight, []).extend(gaps[a - 1:b - 1])
