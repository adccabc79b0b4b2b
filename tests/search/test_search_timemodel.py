"""search prices a layout with the simulator's own step model: the coefficients `simulate`
builds for the same -tp/-pp deployment, all-reduces and pipeline hops included; expert
parallelism is an axis for MoE models."""

from dataclasses import replace

import pytest

from servecap.ledger.devices import find
from servecap.model_configs import load_model
from servecap.sim.efficiency import for_device
from servecap.sim.metrics import SLO
from servecap.sim.rank_model import rank_coefficients
from servecap.sim.search.evaluate import price_layout
from servecap.sim.search.launch import launch_lines
from servecap.sim.search.memory import plan_layout
from servecap.sim.search.prices import price_table
from servecap.sim.search.problem import Problem
from servecap.sim.search.search import run_search
from servecap.sim.search.space import Axes, Layout, layouts
from servecap.sim.step_model import step_s
from servecap.sim.workload import workload_from_dict


def test_tp_and_pp_layouts_carry_the_simulators_collectives(small_problem) -> None:
    layout = Layout("h100-80gb", 2, 2, "bf16", "bf16", 64, 2048)
    priced = price_layout(small_problem, layout)
    deployment = plan_layout(small_problem, layout, small_problem.context_tokens).deployment
    device = find("h100-80gb")
    same = rank_coefficients(small_problem.spec, deployment, device.bandwidth_bytes_per_s,
                             device.flops_per_s("bf16"), 0.0, device, for_device(device.name))
    assert priced.coef == same
    assert priced.coef.collective_bytes_per_token > 0
    assert priced.coef.pipeline_bytes_per_token > 0
    assert priced.coef.gemm_efficiency < 1  # the measured table, not the speed of light
    assert not any("not priced" in n for n in priced.notes)
    # the ring all-reduces cost time: the same step without them is faster
    bare = replace(priced.coef, collective_bytes_per_token=0.0, collective_latency_s=0.0)
    assert step_s(priced.coef, 0, 32, 0, 32_000) > step_s(bare, 0, 32, 0, 32_000)


@pytest.fixture(scope="module")
def moe_problem() -> Problem:
    spec = load_model("qwen3-30b-a3b").spec
    work = workload_from_dict({"seed": 5, "num_requests": 20,
                               "arrivals": {"kind": "poisson", "rate_per_s": 1},
                               "prompt_tokens": {"kind": "uniform", "low": 500, "high": 1500},
                               "output_tokens": {"kind": "uniform", "low": 50, "high": 150}})
    return Problem(spec, "bf16", work, 2.0, SLO(2.0, 0.2), context_tokens=2048,
                   capacity=False)


def test_expert_parallel_axis_prices_all_to_all_and_launches_with_it(moe_problem) -> None:
    axes = Axes(devices=("h100-80gb",), tensor_parallel_sizes=(1, 2), max_num_seqs=(64,),
                max_num_batched_tokens=(2048,), max_gpus=2, expert_parallel=(False, True))
    assert [(lay.tensor_parallel_size, lay.expert_parallel) for lay in layouts(axes)] == \
        [(1, False), (2, False), (2, True)]
    plain, ep = (price_layout(moe_problem, lay) for lay in layouts(axes)[1:])
    assert ep.coef.expert_parallel_size == 2 and plain.coef.expert_parallel_size == 1
    assert ep.coef.collective_bytes_per_token != plain.coef.collective_bytes_per_token
    report = run_search(moe_problem, axes, price_table(axes.devices, {}), "Qwen/Qwen3-30B-A3B",
                        workers=1)
    rows = [r for r in report["candidates"] if r["expert_parallel"]]
    assert rows and all(r["tensor_parallel_size"] == 2 for r in rows)
    lines = launch_lines("Qwen/Qwen3-30B-A3B", rows[0], 2048, 0.9)
    assert "--enable-expert-parallel" in lines["vllm"][0]
    assert "--ep-size 2" in lines["sglang"][0] and "--ep_size 2" in lines["trtllm"][0]


def test_expert_parallel_on_a_dense_model_is_invalid(small_problem) -> None:
    layout = Layout("h100-80gb", 2, 1, "bf16", "bf16", 64, 2048, True)
    verdict = plan_layout(small_problem, layout, 2048)
    assert not verdict.fits and verdict.reason.startswith("invalid: expert parallelism")


def test_expert_parallel_flag_on_a_dense_model_is_refused_by_name(workload_file) -> None:
    from typer.testing import CliRunner

    from servecap.cli.app import app

    out = CliRunner().invoke(app, ["search", "llama-3.1-8b", "--workload", str(workload_file),
                                   "--rate", "1", "--slo-ttft", "1s", "--devices", "h100",
                                   "--enable-expert-parallel"])
    assert out.exit_code == 2
    assert "--enable-expert-parallel" in out.stderr and "dense" in out.stderr


@pytest.mark.parametrize("pin", ["vllm==0.6.3", "vllm"])
def test_a_release_prices_a_layout_as_simulate_engine_does(small_problem, pin) -> None:
    """With a release, a layout's step model is simulate --engine's for the same deployment:
    the device's coefficients with the release's host, graph and API-server terms on top
    (scenario/steps.py and search share sim/vllm_engine.py with_release)."""
    from servecap.ledger.vllm_versions import choose
    from servecap.sim.vllm_engine import engine_terms, with_release

    row = choose(pin).row
    layout = Layout("h100-80gb", 2, 1, "bf16", "bf16", 64, 2048)
    plain = price_layout(small_problem, layout)
    priced = price_layout(replace(small_problem, engine=row), layout)
    assert priced.coef == with_release(plain.coef, row)
    terms = engine_terms(row).coefficients()
    assert {k: getattr(priced.coef, k) for k in terms} == terms
    assert any(n.startswith(f"engine {row.pin}: host") for n in priced.notes)
    assert any(n.startswith("engine: plain") for n in plain.notes)
    # V0 (0.6.3) adds the host's time to every step: a decode of 8 sequences costs more than
    # plain's; the newest release overlaps it with the GPU's (async scheduling on by default),
    # so the step is the larger of the two, never less than plain's
    bare, host = step_s(plain.coef, 0, 8, 0, 8_000), step_s(priced.coef, 0, 8, 0, 8_000)
    assert host > bare if not priced.coef.cpu_overlap else host >= bare
