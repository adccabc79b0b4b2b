"""A small search: llama-3.1-8b on three devices, at most 4 GPUs, 60 short requests."""

import pytest

from servecap.model_configs import load_model
from servecap.sim.metrics import SLO
from servecap.sim.search.prices import price_table
from servecap.sim.search.problem import Problem
from servecap.sim.search.space import Axes
from servecap.sim.workload import workload_from_dict

WORKLOAD = {"seed": 5, "num_requests": 60, "arrivals": {"kind": "poisson", "rate_per_s": 1},
            "prompt_tokens": {"kind": "uniform", "low": 500, "high": 1500},
            "output_tokens": {"kind": "uniform", "low": 50, "high": 150}}
AXES = Axes(devices=("l4-24gb", "a100-80gb", "h100-80gb"), tensor_parallel_sizes=(1, 2),
            weight_dtypes=("bf16", "fp8"), max_num_seqs=(64,), max_num_batched_tokens=(2048,),
            ratios=((1, 1),), max_gpus=4)


@pytest.fixture(scope="session")
def small_problem() -> Problem:
    spec = load_model("llama-3.1-8b").spec
    return Problem(spec, "bf16", workload_from_dict(WORKLOAD), 6.0, SLO(0.5, 0.03),
                   context_tokens=2048, capacity=False)


@pytest.fixture(scope="session")
def small_axes() -> Axes:
    return AXES


@pytest.fixture(scope="session")
def small_prices() -> dict:
    return price_table(AXES.devices, {})


@pytest.fixture(scope="session")
def workload_file(tmp_path_factory):
    import yaml

    path = tmp_path_factory.mktemp("search") / "short.yaml"
    path.write_text(yaml.safe_dump(WORKLOAD))
    return path
