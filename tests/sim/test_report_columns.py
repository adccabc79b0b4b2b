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
