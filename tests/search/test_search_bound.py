"""The decode ceiling (sim/search/bound.py): no simulated replica decodes faster, and the
rungs it skips leave the search's answer as it was."""

from dataclasses import replace

from servecap.sim.deploy import run_once
from servecap.sim.measure import measure
from servecap.sim.sampling import at_rate
from servecap.sim.search import batch
from servecap.sim.search.bound import MARGIN, first_feasible, needed_decode_tps, shortest
from servecap.sim.search.evaluate import deployment_of, price_layout
from servecap.sim.search.prune import ROOFLINE
from servecap.sim.search.search import run_search
from servecap.sim.search.space import Candidate, Layout, ladders, layouts
from servecap.sim.workload import Lengths


def test_no_simulated_replica_decodes_past_its_ceiling(small_problem, small_axes):
    for lay in [x for x in layouts(small_axes) if x.device == "l4-24gb"
                and x.tensor_parallel_size == 1][:1] + [Layout("h100-80gb", 1, 1, "bf16",
                                                              "bf16", 64, 2048)]:
        priced = price_layout(small_problem, lay)
        ceiling = batch.layout_ceiling(small_problem, priced)
        requests = [replace(r, arrival_s=0.0) for r in at_rate(small_problem.workload, 1.0)]
        run = run_once(requests, priced.coef, priced.config, priced.num_blocks,
                       deployment_of(small_problem, Candidate(lay)))
        summary = measure("chunked-prefill", [run], small_problem.slo, itl=False,
                          window=False)
        decoded = (summary["output_tokens_per_s"] - summary["achieved_rps"])
        assert 0 < decoded <= ceiling, (lay.label, decoded, ceiling)


def test_shortest_draw_of_each_kind():
    assert shortest(Lengths("fixed", value=4000)) == 4000
    assert shortest(Lengths("uniform", low=50, high=150)) == 50
    assert shortest(Lengths("lognormal", median=400, sigma=0.9, min_tokens=7)) == 7
    assert shortest(Lengths("empirical", values=(30, 9, 12))) == 9


def test_first_feasible_counts_decode_replicas(small_axes):
    lay = layouts(small_axes)[0]
    ladder = ladders(lay, small_axes)[0]
    assert first_feasible(ladder, 1000.0, 2.5 * MARGIN * 1000.0) == 2  # 3 replicas keep up
    assert first_feasible(ladder, 1000.0, 0.0) == 0
    assert first_feasible(ladder, 0.0, 1.0) == len(ladder)


def test_skipped_rungs_leave_the_answer_as_it_was(small_problem, small_axes, small_prices,
                                                  monkeypatch):
    problem = replace(small_problem, rate_per_s=40.0)
    assert needed_decode_tps(problem.workload, 40.0) == 40.0 * 49
    pruned = run_search(problem, small_axes, small_prices, "meta-llama/Llama-3.1-8B")
    assert pruned["space"]["skipped_monotonic"].get(ROOFLINE, 0) > 0
    monkeypatch.setattr(batch, "first_feasible", lambda *args: 0)
    whole = run_search(problem, small_axes, small_prices, "meta-llama/Llama-3.1-8B")
    assert ROOFLINE not in whole["space"]["skipped_monotonic"]
    assert (pruned["cheapest"] or {}).get("label") == (whole["cheapest"] or {}).get("label")
    assert pruned["tie"] == whole["tie"]
    assert pruned["space"]["simulated"] < whole["space"]["simulated"]
