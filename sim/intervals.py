"""95 % confidence intervals by batch means: for means, ratios and nearest-rank quantiles.

A steady-state window's observations are correlated (a request that waited long is followed
by others that did), so an interval built as if they were independent is too narrow. Batch
means (Law, "Simulation Modeling and Analysis", 5th ed., section 9.5.3; Schmeiser 1982, "Batch
size effects in the analysis of simulation output", Operations Research 30(3), on using 10 to
30 batches) splits the window into NUM_BATCHES consecutive batches by arrival; batches that
each span many request lifetimes are nearly independent, so the spread of the batch
statistics measures the estimator's own spread:

    estimate +/- t(0.975, B - 1) x sd(batch statistics) / sqrt(B)

Means and shares use the batch means directly. A ratio (goodput: requests meeting the SLO per
second of window) uses the ratio estimator's residuals a_b - R d_b. A quantile x_q is
inverted through the distribution function: the share of each batch at or below the overall
x_q estimates F(x_q) with a batch-means spread, and the interval is the nearest-rank quantiles
at q -/+ that half-width (the sample quantile's error is (q - F(x_q)) / f(x_q), Bahadur's
representation, so an interval for F at x_q maps back through the sample's own distribution).
The half-width in F is never narrower than the binomial one, t x r x sqrt(q (1 - q) / n),
r being how much wider than independent sampling the median's batches spread (correlation a
tail quantile, seen by few of its own samples, carries too), so a quantile at the edge of
every batch (the max) does not get a zero-width interval. A side with fewer than MIN_TAIL
effective samples beyond the quantile (n / r^2 x (1 - q) for the high side) is unbounded,
None: a run whose whole sample may lie below the true p99 cannot bound it from above. A
share's interval is likewise never narrower than Wilson's score interval.
"""

import math
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate

import numpy as np

from .columns import seq_sum, stable_sort

CONFIDENCE = 0.95
NUM_BATCHES = 10
MIN_TAIL = 5  # effective samples beyond a quantile needed to bound it on that side
# t quantiles at 0.975 for few degrees of freedom, where the expansion below is inaccurate
_T_SMALL = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
            9: 2.262}
_Z = 1.959963984540054  # the standard normal's 0.975 quantile


def t_quantile(df: int) -> float:
    """Student's t at 0.975: a table for df < 10, else the expansion in 1/df of Abramowitz &
    Stegun 26.7.5 (within 0.001 of the exact value from df = 9 on)."""
    if df in _T_SMALL:
        return _T_SMALL[df]
    z, v = _Z, float(df)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v * v)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3))


def batch_bounds(count: int, num_batches: int = NUM_BATCHES) -> list[int]:
    """Edges splitting `count` observations into at most num_batches consecutive batches of
    near-equal size (at least 2 each); [0, count] when there are too few to batch."""
    num = min(num_batches, count // 2)
    if num < 2:
        return [0, count]
    return [count * i // num for i in range(num + 1)]


def _half(values: list[float]) -> float | None:
    """t x sd / sqrt(B) of batch statistics; None with fewer than 2."""
    num = len(values)
    if num < 2:
        return None
    mean = sum(values) / num
    var = sum((v - mean) ** 2 for v in values) / (num - 1)
    return t_quantile(num - 1) * math.sqrt(var / num)


def mean_interval(estimate: float | None, batch_means: list[float]) -> list[float] | None:
    """[low, high] around a mean or a share from its batches' means."""
    half = _half(batch_means)
    if estimate is None or half is None:
        return None
    return [estimate - half, estimate + half]


def share_interval(estimate: float, batch_shares: list[float], count: int
                   ) -> list[float] | None:
    """A share's interval, kept inside [0, 1] and never narrower than the Wilson score
    interval of `count` independent observations (so a share every batch reaches, 100 %,
    still gets an interval: the batches' spread is 0 there)."""
    out = mean_interval(estimate, batch_shares)
    if out is None:
        return None
    low, high = wilson(estimate, count)
    return [max(0.0, min(out[0], low)), min(1.0, max(out[1], high))]


def wilson(share: float, count: int) -> tuple[float, float]:
    """The Wilson score interval at 95 % (Wilson 1927) of a share of `count` trials."""
    z2 = _Z * _Z
    centre = (share + z2 / (2 * count)) / (1 + z2 / count)
    half = _Z * math.sqrt(share * (1 - share) / count + z2 / (4 * count * count)) \
        / (1 + z2 / count)
    return centre - half, centre + half


def ratio_interval(numerators: list[float], denominators: list[float]) -> list[float] | None:
    """[low, high] of sum(a) / sum(d) from batch totals (a per batch, d its seconds)."""
    total = sum(denominators)
    if len(numerators) < 2 or total <= 0:
        return None
    ratio = sum(numerators) / total
    residuals = [a - ratio * d for a, d in zip(numerators, denominators, strict=True)]
    half = _half(residuals)
    spread = half / (total / len(denominators))
    return [max(0.0, ratio - spread), ratio + spread]


class Sorted:
    """A sample sorted once: nearest-rank quantiles and counts at or below a value. pairs:
    (value, count) with counts > 0; or, with unit counts, the plain values (of_values: a
    list, or a numpy column, kept as one: its stable sort puts the floats where sorted()
    does, and its sum adds them in the same order)."""

    def __init__(self, pairs: list[tuple[float, int]]) -> None:
        pairs = sorted(p for p in pairs if p[1] > 0)
        self.values = [v for v, _ in pairs]
        self.weights: list[int] | None = [w for _, w in pairs]
        self.cum: list[int] | None = list(accumulate(self.weights))
        self.total = self.cum[-1] if self.cum else 0

    @classmethod
    def of_values(cls, values) -> "Sorted":
        out = cls.__new__(cls)
        ordered = stable_sort(values) if isinstance(values, np.ndarray) else sorted(values)
        out.values, out.weights, out.cum, out.total = ordered, None, None, len(values)
        return out

    def quantile(self, share: float) -> float | None:
        """The smallest value with at least share x total at or below it."""
        if not self.total:
            return None
        rank = max(1, math.ceil(round(min(max(share, 0.0), 1.0) * self.total, 6)))
        index = rank - 1 if self.cum is None else bisect_right(self.cum, rank - 1)
        return _plain(self.values[min(index, len(self.values) - 1)])

    def mean(self) -> float | None:
        if not self.total:
            return None
        if self.weights is None:
            if isinstance(self.values, np.ndarray):
                return seq_sum(self.values) / self.total
            return sum(self.values) / self.total
        return sum(v * w for v, w in zip(self.values, self.weights, strict=True)) / self.total

    def max(self) -> float | None:
        return _plain(self.values[-1]) if self.total else None

    def at_or_below(self, value: float) -> int:
        if isinstance(self.values, np.ndarray):
            return int(self.values.searchsorted(value, side="right"))
        i = bisect_right(self.values, value)
        if self.cum is None:
            return i
        return self.cum[i - 1] if i else 0


def _plain(value):
    """A column's float as a Python float; a list's value as it is."""
    return float(value) if isinstance(value, np.floating) else value


def quantile_interval(whole, shares: Callable[[float], list[float]], share: float
                      ) -> list[float | None] | None:
    """[low, high] of the nearest-rank `share` quantile of `whole` (anything with quantile()
    and total), shares(value) giving each batch's share at or below value (see the module
    docstring); None for a side the run cannot bound."""
    estimate = whole.quantile(share)
    if estimate is None:
        return None
    found = shares(estimate)
    half = _half(found)
    if half is None:
        return None
    inflation = _inflation(whole, shares, len(found))
    floor = t_quantile(len(found) - 1) * inflation * math.sqrt(share * (1 - share)
                                                               / whole.total)
    half = max(half, floor)
    effective = whole.total / (inflation * inflation)
    low = whole.quantile(share - half) if share * effective >= MIN_TAIL else None
    high = whole.quantile(share + half) if (1 - share) * effective >= MIN_TAIL else None
    return [low, high]


def sorted_shares(batches: list[Sorted]) -> Callable[[float], list[float]]:
    """shares() for batches held as Sorted samples."""
    return lambda value: [b.at_or_below(value) / b.total for b in batches if b.total]


def _inflation(whole, shares: Callable[[float], list[float]], num_batches: int) -> float:
    """How much wider than independent sampling the batches say the median's share is:
    correlation that tail quantiles, seen by few of their own samples, also carry (at
    least 1)."""
    median = whole.quantile(0.5)
    half = _half(shares(median)) if median is not None else None
    if not half or num_batches < 2:
        return 1.0
    iid = t_quantile(num_batches - 1) * math.sqrt(0.25 / whole.total)
    return max(1.0, half / iid)
