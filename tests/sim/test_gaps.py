"""Token gaps counted per decode iteration (sim/gaps.py) give exactly the percentiles a list
of every token gap gives (metrics.itl_pairs), and each batch's share of them."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment, run_once
from servecap.sim.gaps import Gaps, _counts_column, _grouped, _groups, batch_shares
from servecap.sim.metrics import itl_pairs, weighted_quantiles


@pytest.mark.parametrize("replicas, policy", [(1, "continuous"), (3, "chunked-prefill")])
def test_gaps_are_every_token_gap(teaching, make_requests, replicas, policy) -> None:
    run = run_once(make_requests(rate=12, n=400), teaching,
                   SchedulerConfig(policy=policy, max_num_seqs=24,
                                   max_num_batched_tokens=1024), 3_000,
                   Deployment(replicas))
    timelines = {id(s): r.decode_end_s for r in run.results for s in r.seqs}
    gaps = Gaps(run.seqs, timelines)
    pairs = [p for r in run.results for p in itl_pairs(r)]
    expected = weighted_quantiles(pairs, (90.0, 99.9))
    assert gaps.total == sum(w for _, w in pairs)
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p90", 0.9),
                    ("p99.9", 0.999)):
        assert gaps.quantile(q) == expected[name]
    assert gaps.mean() == pytest.approx(expected["mean"], rel=1e-12)
    assert gaps.max() == expected["max"]
    value = expected["p95"]
    halves = [run.seqs[:200], run.seqs[200:]]
    shares = batch_shares(halves, timelines, value)
    assert sum(count for _, count in shares) == gaps.total
    assert sum(below for below, _ in shares) == gaps.at_or_below(value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40_000), st.floats(0, 1)), min_size=1, max_size=80))
def test_groups_take_the_same_stable_order_at_any_key_width(pairs):
    """_groups sorts 16-bit counts by numpy's radix sort, wider ones by its merge sort: the
    groups, their order and their sorted values are those of a plain stable sort by count."""
    weights = np.array([w for w, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64)
    order = sorted(range(len(pairs)), key=lambda i: pairs[i][0])
    seen = {}
    for i in range(len(pairs)):
        seen.setdefault(pairs[i][0], i)
    counts = sorted(seen, key=lambda w: -1 if w == 1 else seen[w])
    expected = [(w, sorted(values[i] for i in order if pairs[i][0] == w)) for w in counts]
    assert [(w, v.tolist()) for w, v in _groups(weights, values)] == expected


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4000), st.booleans())
def test_groups_keep_signed_zeros_and_nans_in_their_stable_order(seed, size, nan):
    """Where equal floats differ in their bits (-0.0 and 0.0, NaNs of two payloads) the
    groups hold them in a stable sort's order, bit for bit; elsewhere the faster unstable
    sort cannot show. Sizes past numpy's insertion-sort cutoff, where quicksort reorders."""
    rng = np.random.default_rng(seed)
    values = rng.choice(np.array([0.0, -0.0, 1.5, -1.5, 2.0]), size)
    if nan:
        values[rng.integers(0, size, 3)] = [math.nan, -math.nan, math.nan]
    weights = rng.integers(1, 4, size)
    expected = {w: np.sort(values[weights == w], kind="stable") for w in set(weights.tolist())}
    for w, got in _groups(weights, values):
        assert np.array(got).tobytes() == expected[w].tobytes()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([0.0, -0.0, 0.25, 1e-3, 7.5, 2.0])),
                max_size=60),
       st.sampled_from([-1.0, -0.0, 0.0, 1e-3, 0.25, 1.0, 7.5, 9.0]))
def test_counting_over_the_groups_is_bisection_on_each(pairs, value):
    """at_or_below counts every group at once (one searchsorted over the groups' complex
    keys); it is the sum over groups of count x bisect_right, signed zeros included, and the
    mean adds each group left to right as sum() on its list does."""
    from bisect import bisect_right
    weights = np.array([w for w, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64)
    gaps = Gaps.__new__(Gaps)
    gaps._group(_groups(weights, values))
    lists = [(w, v.tolist()) for w, v in gaps.groups]
    assert gaps.at_or_below(value) == sum(w * bisect_right(v, value) for w, v in lists)
    if lists:
        assert gaps.mean() == sum(w * sum(v) for w, v in lists) / gaps.total
        assert gaps.max() == max(v[-1] for _, v in lists)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 200, 255, 256, 300, 32_767, 32_768, 90_000]),
                          st.floats(0, 1)), min_size=0, max_size=60),
       st.integers(1, 4))
def test_the_complex_column_built_with_the_groups_is_the_one_built_after(pairs, split):
    """_grouped writes each sorted group into the column as it goes (counts concatenated into
    8-, 16- or 64-bit keys by _counts_column): the column, the groups and their counting are
    those the groups' own column (Gaps._group from _groups) gives, bit for bit."""
    weights = np.array([w for w, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64)
    pieces = [weights[i::split] for i in range(split)]
    order = np.concatenate([np.arange(len(pairs))[i::split] for i in range(split)]).astype(int)
    groups, keys = _grouped(_counts_column(pieces), values[order])
    expected = Gaps.__new__(Gaps)
    expected._group(_groups(weights[order], values[order]))
    built = Gaps.__new__(Gaps)
    built._group(groups, keys)
    assert keys.tobytes() == expected._keys.tobytes()
    assert [(w, v.tolist()) for w, v in groups] == [(w, v.tolist()) for w, v in expected.groups]
    for value in (0.0, 0.5, 1.0):
        assert built.at_or_below(value) == expected.at_or_below(value)
    if len(pairs):
        assert built.mean() == expected.mean()


def test_batches_of_several_runs_read_their_own_runs_timelines(teaching, make_requests):
    """--seeds measures batches of several runs together: each batch looked up in its own
    run's timelines gives the gaps and shares one dict of every run's gives."""
    from servecap.sim.gaps import BatchGaps
    runs = [run_once(make_requests(rate=12, n=300, seed=seed), teaching,
                     SchedulerConfig(policy="chunked-prefill", max_num_seqs=24,
                                     max_num_batched_tokens=1024), 3_000, Deployment(2))
            for seed in (1, 2)]
    own = [{id(s): r.decode_end_s for r in run.results for s in r.seqs} for run in runs]
    merged = own[0] | own[1]
    batches = [runs[0].seqs[:150], runs[0].seqs[150:], runs[1].seqs[:100],
               runs[1].seqs[100:]]
    apart = BatchGaps(batches, [own[0], own[0], own[1], own[1]])
    together = BatchGaps(batches, merged)
    whole, expected = apart.gaps(), together.gaps()
    assert whole.total == expected.total > 0
    assert whole._keys.tobytes() == expected._keys.tobytes()
    assert whole.mean() == expected.mean()
    for q in (0.5, 0.99):
        assert whole.quantile(q) == expected.quantile(q)
        assert apart.shares(whole.quantile(q)) == together.shares(whole.quantile(q))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 300_000), st.sampled_from([0.0, 0.01, 0.5, 1.0]))
def test_live_steps_are_written_as_compress_writes_them(seed, size, dead):
    """_compress_into copies a busy run's live steps chunk by chunk (a mask nearly all set,
    across chunk edges) and compresses a mixed mask: either way np.compress's column."""
    from servecap.sim.gaps import _compress_into
    rng = np.random.default_rng(seed)
    column = rng.random(size)
    flags = rng.random(size) >= dead
    out = np.full(int(flags.sum()), np.nan)
    _compress_into(flags, column, out)
    assert out.tobytes() == np.compress(flags, column).tobytes()


def test_prefix_counts_are_the_running_count():
    """32-bit running counts of the gaps at or below a value: cumsum's integers."""
    from servecap.sim.gaps import _prefix_counts
    flags = np.random.default_rng(3).random(200_000) < 0.3
    got = _prefix_counts(flags)
    assert got.tolist() == [0] + np.cumsum(flags, dtype=np.int64).tolist()
