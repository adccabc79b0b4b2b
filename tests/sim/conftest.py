"""Shared builders for the simulation tests: a teaching-size device and small workloads."""

import json

import pytest

from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import draw_requests
from servecap.sim.workload import workload_from_dict

# seed 004's illustration: 14 GB of weights at 2,000 GB/s; a 7B model's FLOPs per token
TEACHING = Coefficients(weights_bytes=14_000_000_000, kv_bytes_per_token=131_072,
                        flops_per_token=14_000_000_000, bandwidth_bytes_per_s=2e12,
                        flops_per_s=990e12, step_overhead_s=0.001)


def requests(rate=4.0, n=300, prompt=None, output=None, seed=1, **extra):
    doc = {"seed": seed, "num_requests": n,
           "arrivals": {"kind": "poisson", "rate_per_s": rate},
           "prompt_tokens": prompt or {"kind": "lognormal", "median": 300, "sigma": 0.8,
                                       "max": 4000},
           "output_tokens": output or {"kind": "uniform", "low": 8, "high": 300}, **extra}
    return draw_requests(workload_from_dict(doc))


@pytest.fixture(scope="session")
def teaching():
    return TEACHING


@pytest.fixture(scope="session")
def make_requests():
    return requests


@pytest.fixture
def small_workload(tmp_path):
    """Writes a 120-request workload file (4 req/s, uniform lengths), fields replaced as
    asked: small_workload(num_requests=5)."""

    def write(**patch):
        doc = {"seed": 2, "num_requests": 120,
               "arrivals": {"kind": "poisson", "rate_per_s": 4},
               "prompt_tokens": {"kind": "uniform", "low": 50, "high": 800},
               "output_tokens": {"kind": "uniform", "low": 10, "high": 200}} | patch
        path = tmp_path / "w.yaml"
        path.write_text(json.dumps(doc))  # JSON is YAML
        return path

    return write
