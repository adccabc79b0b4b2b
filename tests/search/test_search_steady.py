"""One capacity: search and sweep agree on the same deployment; a short search says it is
short; search sizes its pool as `plan --engine vllm` does; more GPUs never lower capacity."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.sim.capacity import capacity, highest, meets
from servecap.sim.search.evaluate import price_layout, slo_capacity
from servecap.sim.search.frontier import overlap
from servecap.sim.search.space import Candidate, Layout

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "workloads" / "chat.yaml"
# The deployment of the question: llama-3.1-8b on one H100, max_num_seqs 128, an 8,192-token
# budget, chunked prefill, chat.yaml, TTFT <= 1 s, TPOT <= 50 ms
SLOS = ["--slo-ttft", "1s", "--slo-tpot", "50ms"]


def _json(*args) -> dict:
    out = CliRunner().invoke(app, [str(a) for a in args])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.stdout)


def _search(*extra) -> dict:
    return _json("search", "llama-3.1-8b", "--workload", CHAT, "--rate", "4", *SLOS,
                 "--devices", "h100-80gb", "--max-gpus", "1", "--tp", "1", "--max-num-seqs",
                 "128", "--max-num-batched-tokens", "8192", "--disaggregate", "none",
                 "--workers", "1", "--json", *extra)


@pytest.fixture(scope="module")
def sweep() -> dict:
    return _json("sweep", "llama-3.1-8b", "--device", "h100-80gb", "--workload", CHAT, *SLOS,
                 "--max-num-seqs", "128", "--max-num-batched-tokens", "8192", "--policy",
                 "chunked-prefill", "--json")


@pytest.mark.slow
def test_search_and_sweep_find_the_same_capacity(sweep) -> None:
    best = _search()["cheapest"]
    assert best["capacity_rps"] == pytest.approx(sweep["capacity_rps"], rel=0.10)
    for report in (best, sweep):  # each its own interval, holding its estimate
        low, high = report["capacity_rps_ci"]  # high None: capped by saturation
        assert low <= report["capacity_rps"] and (high is None or report["capacity_rps"] <= high)


@pytest.mark.slow
def test_a_200_request_search_agrees_or_says_it_is_not_steady(sweep) -> None:
    report = _search("--num-requests", "200")
    best = report["cheapest"]
    agrees = best["capacity_rps"] == pytest.approx(sweep["capacity_rps"], rel=0.10)
    assert agrees or report["steady_state"] is False
    assert report["steady_state"] is (best["steady_state"]
                                      and best["capacity_steady_state"] is not False)


def test_search_pools_kv_blocks_as_plan_engine_vllm_does(small_problem) -> None:
    lay = Layout("h100-80gb", 1, 1, "bf16", "bf16", 256, 8192)
    priced = price_layout(small_problem, lay)
    plan = _json("plan", "llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm",
                 "--context", small_problem.context_tokens, "--max-num-batched-tokens",
                 "8192", "--max-num-seqs", "256", "--json")
    assert priced.num_blocks == plan["num_gpu_blocks"]


def test_capacity_grows_with_gpus(small_problem) -> None:
    """The same layout with 1, 2 and 3 replicas: each capacity at least the one before (to
    the bisection's tolerance), as the pruning by GPU count assumes."""
    lay = Layout("h100-80gb", 1, 1, "bf16", "bf16", 64, 2048)
    priced = price_layout(small_problem, lay)
    found = [slo_capacity(small_problem, priced, Candidate(lay, r)) for r in (1, 2, 3)]
    rates = [f["capacity_rps"] for f in found]
    tolerance = found[0]["capacity_tolerance"]
    assert rates[0] > 0
    for fewer, more in zip(rates, rates[1:], strict=False):
        assert more >= fewer * (1 - tolerance)


def test_bisection_finds_a_known_threshold_to_its_tolerance() -> None:
    """A synthetic deployment meeting the target below 7.3 req/s: the capacity is within 2 %
    below it whatever the start, and its interval is where the attainment's straddles."""
    def point(rate: float) -> dict:
        share = 1.0 if rate < 7.0 else 0.9 if rate < 7.3 else 0.5
        ci = [0.95, 1.0] if rate < 7.0 else [0.85, 0.95] if rate < 7.3 else [0.4, 0.6]
        return {"completed": 100, "overloaded": False, "slo_attainment": share,
                "slo_attainment_ci": ci, "steady_state": True, "measured_requests": 100}
    for start in (0.5, 7.1, 40.0):
        found = capacity(point, 0.9, start)
        assert 7.3 / 1.02 <= found["capacity_rps"] < 7.3
        low, high = found["capacity_rps_ci"]
        assert 7.0 / 1.02 <= low < 7.0 and high == found["capacity_rps"]
        assert meets(point(found["capacity_rps"]), 0.9)
    assert highest(lambda r: False, 1.0, 0.02) == 0.0  # never meets: no capacity
    assert capacity(point, 0.9, 1.0, saturation_rps=5.0)["capacity_limited_by"] == \
        "saturation"


def test_a_capacity_capped_by_saturation_has_no_estimated_high_end() -> None:
    """Every rate below saturation surely meets: both upward bisections stop at the cap, not
    at an attainment interval, so the high end is unknown (None), never the zero-width
    [x, x] it read before (sweep printed '19.60 ±0.00 (95 %: 19.60-19.60)'); the low end,
    where the attainment's interval surely met, stays."""
    def point(rate: float) -> dict:
        return {"completed": 100, "overloaded": False, "slo_attainment": 1.0,
                "slo_attainment_ci": [0.95, 1.0], "steady_state": False,
                "measured_requests": 100}
    capped = capacity(point, 0.9, 1.0, saturation_rps=5.0)
    assert capped["capacity_limited_by"] == "saturation"
    assert 5.0 / 1.02 <= capped["capacity_rps"] < 5.0
    assert capped["capacity_rps_ci"] == [capped["capacity_rps"], None]
    endless = capacity(point, 0.9, 1.0)  # met up to the last doubling: no cap known at all
    assert endless["capacity_limited_by"].startswith("none")
    assert endless["capacity_rps_ci"][1] is None
    never = capacity(lambda rate: point(rate) | {"slo_attainment": 0.5,
                                                 "slo_attainment_ci": [0.4, 0.6]}, 0.9, 1.0)
    assert never["capacity_rps"] == 0.0 and never["capacity_rps_ci"] == [0.0, 0.0]


def test_an_unknown_high_end_overlaps_whatever_lies_above_its_low_end() -> None:
    assert overlap([18.5, None], [20.0, 21.0]) and overlap([20.0, 21.0], [18.5, None])
    assert not overlap([18.5, None], [10.0, 12.0]) and not overlap([10.0, 12.0], [18.5, None])
