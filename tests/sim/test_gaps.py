"""Token gaps counted per decode iteration (sim/gaps.py) give exactly the percentiles a list
of every token gap gives (metrics.itl_pairs), and each batch's share of them."""

import pytest

from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment, run_once
from servecap.sim.gaps import Gaps, batch_shares
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
