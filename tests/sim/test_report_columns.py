"""The report's column arithmetic gives the floats the Python passes over lists gave, bit for
bit: sums left to right (not numpy's pairwise sum), stable sorts."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim import columns
from servecap.sim.metrics import quantiles

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
