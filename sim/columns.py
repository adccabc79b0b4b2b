"""Per-request floats as numpy columns, giving the floats the Python lists gave, bit for bit:
the requests are still read in one Python pass (one walk over the objects in memory order is
the cheapest read of them), and the sorts and sums over what it collected run on columns.

Elementwise arithmetic (a difference, a quotient) is the same IEEE operation either way; a
sort is the same when stable (equal floats keep their order, so -0.0 and 0.0 stay where
sorted() leaves them); a float sum is not: numpy's sum adds pairwise, Python's sum() left to
right from the integer 0. seq_sum adds left to right (np.add.accumulate, which carries each
partial sum into the next) from 0.0, which is sum()'s first step, 0 + x.
"""


import numpy as np

from .metrics import nearest_rank, wanted_quantiles
from .state import request_columns


def floats(values: list) -> np.ndarray:
    """A list of floats as a column (fromiter: a plain copy, where np.array first looks at
    every element for the type to make)."""
    return np.fromiter(values, dtype=np.float64, count=len(values))


def seq_sum(values: np.ndarray) -> float:
    """sum(values.tolist()), the same float: left to right from 0. Added from the first
    value, then 0.0 + that sum: the two folds differ only where every partial sum is a zero
    (0.0 + -0.0 is 0.0, -0.0 + -0.0 is -0.0), and 0.0 + the last one then makes them equal;
    no column with a 0.0 in front is copied."""
    if not len(values):
        return 0.0
    return 0.0 + float(np.add.accumulate(values, dtype=np.float64)[-1])


def stable_sort(values: np.ndarray) -> np.ndarray:
    """sorted(values): the same floats in the same places (a stable sort's array, by the
    faster unstable sort wherever that cannot differ from it: float_sort_kind)."""
    return np.sort(values, kind=float_sort_kind(values))


def stable_argsort(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable"): by the unstable sort (4x faster on a run's
    latencies) where no two values compare equal and none is NaN, as then only one order
    sorts them; the stable sort where ties (-0.0 and 0.0 among them) or NaNs could be put
    in another order."""
    if values.dtype.kind == "f" and len(values):
        order = np.argsort(values)
        ordered = values[order]  # NaNs last, ties side by side
        if not (np.isnan(ordered[-1]) or (ordered[1:] == ordered[:-1]).any()):
            return order
    return np.argsort(values, kind="stable")


def float_sort_kind(values: np.ndarray) -> str:
    """numpy's default sort (SIMD quicksort, 5x its stable sort on a run's latencies and 7x
    on its gaps) where it gives the stable sort's array bit for bit: floats that compare
    equal are the same bits unless one is -0.0 (equal to 0.0) or NaN, and only then does the
    order of equals show. Integers: equal ones are the same bits."""
    if values.dtype.kind != "f" or (len(values) and values.min() > 0):
        return "quicksort"  # every value positive (a NaN makes the least NaN): one pass
    signed_zero = np.signbit(values) & (values == 0)
    return "stable" if signed_zero.any() or np.isnan(values).any() else "quicksort"


def quantiles(values: np.ndarray, extra: tuple[float, ...] = ()) -> dict[str, float | None]:
    """metrics.quantiles of a column: the same ranks, and the mean summed in sorted order."""
    wanted, keys = wanted_quantiles(extra)
    total = len(values)
    if not total:
        return dict.fromkeys(keys)
    ordered = stable_sort(values)
    out = {name: float(ordered[min(nearest_rank(q, total), total) - 1]) for name, q in wanted}
    out["mean"] = seq_sum(ordered) / total
    if extra:
        out["max"] = float(ordered[-1])
    return {k: out[k] for k in keys}


class RequestColumns:
    """Each request's fields the reports read (state.request_columns: one pass over the
    objects, in C where compiled), as numpy columns in the requests' order: the times
    arrival, admitted, first (token), last (token) and release (NaN where not reached), the
    states (indices in seq.STATES) and done, and the integers prompt, output, prefix (tokens
    of its shared prefix), hit (prefix hit tokens), offload (of them, from the host tier),
    preemptions, recomputed (tokens) and chunks (prefill chunks). The reports' per-request
    arithmetic then runs on the columns: the same IEEE operation on each element, so the
    same floats a loop over the objects gave."""

    NAMES = ("arrival", "admitted", "first", "last", "release", "states", "prompt", "output",
             "prefix", "hit", "offload", "preemptions", "recomputed", "chunks")
    __slots__ = NAMES + ("done",)

    def __init__(self, seqs: list | None = None, parts: tuple | None = None) -> None:
        if parts is None:
            parts = tuple(as_column(col) for col in request_columns(seqs))
        for name, col in zip(self.NAMES, parts, strict=True):
            setattr(self, name, col)
        self.done = self.states == 2

    def __len__(self) -> int:
        return len(self.arrival)

    def part(self, start: int, stop: int) -> "RequestColumns":
        """The requests [start, stop) (views of these columns)."""
        return RequestColumns(parts=tuple(getattr(self, name)[start:stop]
                                          for name in self.NAMES))


def as_column(column) -> np.ndarray:
    """An array("d") or array("q") as the numpy column over its memory (no copy)."""
    dtype = np.float64 if column.typecode == "d" else np.int64
    return np.frombuffer(column, dtype=dtype) if len(column) else np.zeros(0, dtype=dtype)
