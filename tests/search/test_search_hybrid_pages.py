"""search simulates a hybrid in vLLM's pages: raised attention blocks, states held per request."""

import math

import pytest

from servecap.model_configs import load_model
from servecap.sim.metrics import SLO
from servecap.sim.search.evaluate import price_layout
from servecap.sim.search.memory import plan_layout
from servecap.sim.search.problem import Problem
from servecap.sim.search.space import Axes, layouts
from servecap.sim.workload import workload_from_dict

CONTEXT = 8192
WORK = {"seed": 5, "num_requests": 20, "arrivals": {"kind": "poisson", "rate_per_s": 1},
        "prompt_tokens": {"kind": "uniform", "low": 500, "high": 1500},
        "output_tokens": {"kind": "uniform", "low": 50, "high": 150}}
LAYOUT = layouts(Axes(devices=("h100-80gb",), tensor_parallel_sizes=(1,), max_num_seqs=(64,),
                      max_num_batched_tokens=(2048,), max_gpus=1))[0]


def _priced(model: str):
    problem = Problem(load_model(model).spec, "bf16", workload_from_dict(WORK), 2.0,
                      SLO(2.0, 0.2), context_tokens=CONTEXT, capacity=False)
    budget = plan_layout(problem, LAYOUT, CONTEXT).deployment.plan.budget
    return price_layout(problem, LAYOUT), budget


@pytest.mark.parametrize("model", ["qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"])
def test_a_hybrid_is_simulated_in_its_pages_and_holds_vllm_s_concurrency(model) -> None:
    priced, budget = _priced(model)
    assert budget.kinds.count("state") >= 1 and budget.block_size_tokens > 16
    assert priced.config.block_size_tokens == budget.block_size_tokens
    assert priced.config.state_blocks >= 1
    per_request = math.ceil(CONTEXT / budget.block_size_tokens) + priced.config.state_blocks
    # full-context requests the simulated pool holds = vLLM's "Maximum concurrency", floored
    assert priced.num_blocks // per_request == math.floor(budget.max_concurrency)


def test_a_model_without_states_keeps_its_blocks() -> None:
    priced, budget = _priced("llama-3.1-8b")
    assert (priced.num_blocks, priced.config.block_size_tokens, priced.config.state_blocks) \
        == (budget.num_gpu_blocks, 16, 0)
