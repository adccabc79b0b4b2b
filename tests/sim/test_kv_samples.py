"""KvSamples (the engine's KV samples as columns) reads exactly as the list of (time, tokens,
blocks) tuples it stands for: length, iteration, indexes, slices, the columns' split, a
pickle's round trip (a search's workers send results back), with every float bit kept."""

import pickle

from hypothesis import given
from hypothesis import strategies as st

from servecap.sim.state import KvSamples, kv_columns

sample = st.tuples(st.floats(allow_nan=False), st.integers(0, 2**62), st.integers(0, 2**40))


@given(st.lists(sample, max_size=40), st.integers(-50, 50), st.integers(-50, 50),
       st.integers(1, 5))
def test_reads_as_the_list_of_tuples(samples, start, stop, step):
    kept = KvSamples(samples)
    assert len(kept) == len(samples) and bool(kept) == bool(samples)
    assert list(kept) == samples
    assert repr([tuple(s) for s in kept]) == repr(samples)
    assert kept[start:stop:step] == samples[start:stop:step]
    if samples:
        assert kept[start % len(samples)] == samples[start % len(samples)]
        assert kept[-1] == samples[-1]
    assert [list(c) for c in kv_columns(kept)] == [list(c) for c in kv_columns(samples)]
    assert list(pickle.loads(pickle.dumps(kept))) == samples


@given(st.lists(st.integers(0, 2**62), max_size=30))
def test_occupancy_sums_are_exact(values):
    """The occupancy's sums equal Python's integer sums, near int64's limit too."""
    from servecap.sim.records import _exact_sum
    assert _exact_sum(KvSamples((0.0, v, v) for v in values).tokens) == sum(values)
