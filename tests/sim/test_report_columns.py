"""The report's column arithmetic gives the floats the Python passes over lists gave, bit for
bit: sums left to right (not numpy's pairwise sum), stable sorts, and requests put in arrival
order only where they were not already."""

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim import columns
from servecap.sim.deploy import _arrival, by_arrival
from servecap.sim.metrics import quantiles
from servecap.sim.sampling import Request
from servecap.sim.state import Seq

FLOATS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def bits(value) -> bytes:
    return struct.pack("<d", value)


@given(st.lists(FLOATS, max_size=300))
def test_seq_sum_is_sums_float(values):
    assert bits(columns.seq_sum(columns.floats(values))) == bits(float(sum(values)))


def test_seq_sum_is_not_numpys_pairwise_sum():
    """A column where the two orders round differently: numpy's own sum would move the bits."""
    values = [1.0] + [1e-16] * 1000
    column = columns.floats(values)
    assert float(column.sum()) != sum(values)
    assert columns.seq_sum(column) == sum(values)


def test_negative_zero_sums_as_sum_does():
    assert bits(columns.seq_sum(columns.floats([-0.0, -0.0]))) == bits(sum([-0.0, -0.0]))


@settings(max_examples=200)
@given(st.lists(st.one_of(FLOATS, st.sampled_from([0.0, -0.0, 1.5])), max_size=300),
       st.sampled_from([(), (90.0,), (99.9, 50.0)]))
def test_column_quantiles_are_the_lists(values, extra):
    ours = columns.quantiles(columns.floats(values), extra)
    theirs = quantiles(values, extra)
    assert list(ours) == list(theirs)
    for key in theirs:
        assert (ours[key] is None) == (theirs[key] is None)
        if theirs[key] is not None:
            assert bits(ours[key]) == bits(theirs[key]), key


@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.25]), st.integers(0, 50)),
                max_size=60), st.booleans())
def test_by_arrival_is_the_sort(keys, presorted):
    seqs = [Seq(Request(rid, arrival, 10, 5)) for arrival, rid in keys]
    if presorted:
        seqs.sort(key=_arrival)
    ordered = by_arrival(list(seqs))
    assert ordered == sorted(seqs, key=_arrival)
    assert [id(s) for s in ordered] == [id(s) for s in sorted(seqs, key=_arrival)]


def test_already_ordered_requests_are_not_copied():
    seqs = [Seq(Request(i, i * 0.5, 10, 5)) for i in range(100)]
    assert by_arrival(seqs) is seqs
    assert math.isclose(seqs[-1].req.arrival_s, 49.5)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 40), min_size=0, max_size=400),
       st.integers(0, 3))
def test_mser5_on_counts_is_the_loop(series, ramp):
    """The warm-up cut of a count series (requests in the system, KV blocks) on numpy is the
    suffix-sum loop's, ties included (the least statistic's smallest cut)."""
    from servecap.sim.steady import MSER_BATCH, _mser5_floats, mser5
    series = [v + ramp * (i < 50) * 10 for i, v in enumerate(series)]
    k = len(series) // MSER_BATCH
    expected = None if k < 10 else _mser5_floats(series, k)
    assert mser5(series) == expected


def test_mser5_ties_take_the_earliest_cut():
    from servecap.sim.steady import MSER_BATCH, _mser5_floats, mser5
    flat = [3] * 200
    assert mser5(flat) == _mser5_floats(flat, len(flat) // MSER_BATCH) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.5, -1.5, 2.25, 1e-3]), max_size=400),
       st.integers(0, 3))
def test_sorted_columns_are_the_stable_sort_bit_for_bit(values, nans):
    """columns.stable_sort (and Sorted.of_values on a column) may run numpy's unstable
    quicksort: the array is the stable sort's, bit for bit, signed zeros and NaNs of two
    payloads included (both past numpy's insertion-sort cutoff of 16); without NaNs, it is
    sorted()'s list."""
    import numpy as np

    from servecap.sim.intervals import Sorted
    column = columns.floats(values + [math.nan, -math.nan, math.nan][:nans])
    expected = np.sort(column, kind="stable")
    assert columns.stable_sort(column).tobytes() == expected.tobytes()
    assert Sorted.of_values(column).values.tobytes() == expected.tobytes()
    if not nans:
        assert [bits(v) for v in columns.stable_sort(column).tolist()] == \
            [bits(v) for v in sorted(values)]
    counts = np.array([int(abs(v) * 4) for v in values], dtype=np.int64)
    assert columns.stable_sort(counts).tolist() == sorted(counts.tolist())


def test_a_column_without_signed_zeros_or_nans_takes_the_unstable_sort():
    """The faster sort where it cannot show, the stable one where it can."""
    import numpy as np
    assert columns.float_sort_kind(columns.floats([0.0, 1.0, 0.5])) == "quicksort"
    assert columns.float_sort_kind(columns.floats([0.0, -0.0])) == "stable"
    assert columns.float_sort_kind(columns.floats([1.0, math.nan])) == "stable"
    assert columns.float_sort_kind(np.array([3, 0, -2])) == "quicksort"


@settings(max_examples=100)
@given(st.lists(st.integers(0, 40), min_size=0, max_size=400), st.integers(0, 3))
def test_mser5_reads_a_column_as_its_list(series, ramp):
    """find_window hands mser5 its counts as a 64-bit column, no list: the same cut."""
    import numpy as np

    from servecap.sim.steady import mser5
    series = [v + ramp * (i < 50) * 10 for i, v in enumerate(series)]
    assert mser5(np.array(series, dtype=np.int64)) == mser5(series)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(FLOATS, st.sampled_from([0.0, -0.0, 1.5, math.nan])), max_size=300),
       st.booleans())
def test_stable_argsort_is_the_stable_order(values, distinct):
    """The tail's order of requests by latency: the stable sort's permutation, ties, signed
    zeros and NaNs included; distinct values (one order sorts them) take the unstable sort."""
    import numpy as np
    if distinct:
        values = list({bits(v): v for v in values if not math.isnan(v) and v != 0}.values())
    column = columns.floats(values)
    expected = np.argsort(column, kind="stable")
    assert columns.stable_argsort(column).tolist() == expected.tolist()
    counts = np.array([int(abs(v)) % 7 for v in values if not math.isnan(v)], dtype=np.int64)
    assert columns.stable_argsort(counts).tolist() == \
        np.argsort(counts, kind="stable").tolist()
