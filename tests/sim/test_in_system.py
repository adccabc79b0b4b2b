"""steady.in_system counts, at each arrival, the requests arrived and not yet released by
numpy's searchsorted over the sorted releases: the counts bisection gives, request by
request."""

from bisect import bisect_right
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim.steady import in_system

TIMES = st.one_of(st.integers(0, 50), st.floats(0, 50, allow_nan=False))


def _reference(seqs) -> list[int]:
    releases = sorted(s.release_s for s in seqs if s.release_s is not None)
    return [max(i - bisect_right(releases, s.req.arrival_s), 0) for i, s in enumerate(seqs)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TIMES, st.one_of(st.none(), TIMES)), max_size=60))
def test_in_system_is_the_bisection(rows):
    """Arrivals in order (ints and floats, ties), releases before, at and after them, some
    never released."""
    rows.sort(key=lambda r: r[0])
    seqs = [SimpleNamespace(req=SimpleNamespace(arrival_s=a), release_s=r) for a, r in rows]
    got = in_system(seqs)
    assert got == _reference(seqs)
    assert all(type(n) is int for n in got)
