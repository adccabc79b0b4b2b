"""The winner meets every SLO and nothing cheaper does (brute force); the frontier is
non-dominated; pruning by monotonicity changes no answer."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim.capacity import meets
from servecap.sim.metrics import SLO
from servecap.sim.search.evaluate import (
    candidate_of,
    evaluate,
    price_layout,
    row_capacity,
    run_at,
    slo_capacity,
)
from servecap.sim.search.frontier import dominates, pareto
from servecap.sim.search.search import run_search
from servecap.sim.search.space import Candidate, Layout


@pytest.fixture(scope="module")
def brute(small_problem, small_axes, small_prices):
    return run_search(small_problem, small_axes, small_prices, "m", workers=1, prune=False)


@pytest.fixture(scope="module")
def pruned(small_problem, small_axes, small_prices):
    return run_search(small_problem, small_axes, small_prices, "m", workers=1, prune=True)


def test_brute_force_explores_the_whole_space(brute) -> None:
    space = brute["space"]
    assert space["simulated"] + space["memory_pruned"] + space["invalid"] == \
        space["num_candidates"] == 54
    assert space["skipped_monotonic"] == {}


def test_winner_meets_every_slo_when_simulated_again(small_problem, pruned) -> None:
    best = pruned["cheapest"]
    assert best is not None and best["meets_slo"]
    cand = candidate_of(best)
    assert cand.label == best["label"]
    summary = run_at(small_problem, price_layout(small_problem, cand.layout), cand,
                     small_problem.rate_per_s)
    for key in ("ttft_attainment", "tpot_attainment", "slo_attainment"):
        assert summary[key] >= small_problem.target_attainment
    assert summary["slo_attainment_ci"][0] >= small_problem.target_attainment


def test_no_cheaper_candidate_meets_the_slos(brute, pruned) -> None:
    best = pruned["cheapest"]
    cheaper = [r for r in brute["candidates"] if r["cost_usd_per_hour"] < best["cost_usd_per_hour"]]
    assert cheaper, "the space should hold cheaper candidates that miss"
    assert not any(r["meets_slo"] for r in cheaper)
    assert best["cost_usd_per_hour"] == min(r["cost_usd_per_hour"] for r in brute["candidates"]
                                            if r["meets_slo"])


def test_pruning_skips_work_but_not_the_answer(brute, pruned) -> None:
    assert pruned["space"]["simulated"] < brute["space"]["simulated"]
    assert pruned["cheapest"]["label"] == brute["cheapest"]["label"]
    by_label = {r["label"]: r for r in brute["candidates"]}
    for row in pruned["candidates"]:  # what was simulated is the same number either way
        assert row == by_label[row["label"]]


def test_more_replicas_never_lose_the_slo(brute) -> None:
    """The monotonicity the pruning rests on, checked on every ladder of the brute force."""
    ladders: dict[tuple, list] = {}
    for row in brute["candidates"]:
        key = (row["label"].rsplit(" ", 1)[0], row["mode"])
        ladders.setdefault(key, []).append(row)
    for rows in ladders.values():
        rows.sort(key=lambda r: r["num_gpus"])
        met = [r["meets_slo"] for r in rows]
        assert met == sorted(met), rows[0]["label"]


def test_frontier_is_non_dominated_and_covers_the_rest(brute) -> None:
    front = brute["frontier"]
    rows = [r for r in brute["candidates"] if r["tokens_per_s_per_user"] is not None]
    assert len(front) >= 2
    for point in front:
        assert not any(dominates(r, point) for r in rows)
    labels = {p["label"] for p in front}
    for row in rows:
        if row["label"] not in labels:
            assert any(dominates(p, row) or _same(p, row) for p in front)


def _same(a: dict, b: dict) -> bool:
    return (a["tokens_per_s_per_gpu"], a["tokens_per_s_per_user"]) == \
        (b["tokens_per_s_per_gpu"], b["tokens_per_s_per_user"])


points = st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=30)


@given(points)
def test_pareto_keeps_exactly_the_non_dominated_points(pts) -> None:
    rows = [{"label": f"c{i}", "tokens_per_s_per_gpu": g, "tokens_per_s_per_user": u}
            for i, (g, u) in enumerate(pts)]
    front = pareto(rows)
    kept = {(r["tokens_per_s_per_gpu"], r["tokens_per_s_per_user"]) for r in front}
    expected = {(g, u) for g, u in pts
                if not any(g2 >= g and u2 >= u and (g2, u2) != (g, u) for g2, u2 in pts)}
    assert kept == expected
    assert len(front) == len(kept)  # one row per point, however many tie


def test_capacity_bisection_brackets_the_slo(small_problem, pruned) -> None:
    # a 20 ms ITL target: at the search's 30 ms the cheapest layout (the A100 at FP8, since
    # the L4 runs at its derated efficiency, not at peak) meets it up to saturation, where
    # no failing rate brackets it (capacity_rps_ci's high end is then null)
    problem = replace(small_problem, capacity=True, slo=SLO(0.5, 0.02))
    best = pruned["cheapest"]
    found = row_capacity(problem, best)
    capacity, target = found["capacity_rps"], problem.target_attainment
    assert capacity >= problem.rate_per_s
    low, high = found["capacity_rps_ci"]
    assert low <= capacity <= high
    cand = candidate_of(best)
    priced = price_layout(problem, cand.layout)
    assert meets(run_at(problem, priced, cand, capacity, decided=False), target)
    above = min(p["rate_per_s"] for p in found["capacity_probes"]
                if p["rate_per_s"] > capacity)
    assert above <= capacity * (1 + found["capacity_tolerance"])
    assert not meets(run_at(problem, priced, cand, above, decided=False), target)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 999), rate=st.floats(2, 30), ttft_s=st.floats(0.1, 2),
       tpot_s=st.floats(0.01, 0.06), target=st.sampled_from([0.5, 0.9, 0.99]))
def test_meeting_the_slos_is_monotone_in_replicas(small_problem, seed, rate, ttft_s, tpot_s,
                                                  target) -> None:
    """What the pruning assumes, on random workloads: a layout that meets the SLOs with r
    replicas (or k x a prefill:decode pair) meets them with more."""
    work = replace(small_problem.workload, seed=seed, num_requests=60)
    problem = replace(small_problem, workload=work, rate_per_s=rate,
                      slo=SLO(ttft_s, tpot_s), target_attainment=target)
    lay = Layout("l4-24gb", 1, 1, "bf16", "bf16", 64, 2048)
    priced = price_layout(problem, lay)
    for ladder in ([Candidate(lay, r) for r in (1, 2, 3, 4)],
                   [Candidate(lay, 0, k, k) for k in (1, 2)]):
        met = [evaluate(problem, priced, c)["meets_slo"] for c in ladder]
        assert met == sorted(met)


def test_the_rows_own_run_is_the_capacitys_probe_at_the_target(small_problem, pruned) -> None:
    """row_capacity reuses the row's run at the target rate: the same capacity, interval and
    probes as when that rate is simulated again."""
    problem = replace(small_problem, capacity=True)
    best = pruned["cheapest"]
    cand = candidate_of(best)
    again = slo_capacity(problem, price_layout(problem, cand.layout), cand)
    assert row_capacity(problem, best) == again
