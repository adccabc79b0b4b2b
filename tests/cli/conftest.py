"""Shared CLI fixtures: a runner that keeps stdout and stderr apart, and one search whose
launch lines the launch-line tests paste back."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from servecap.cli.app import app


@pytest.fixture
def run():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


@pytest.fixture(scope="session")
def searched(tmp_path_factory) -> dict:
    """search's --json report for llama-3.1-8b at 6 req/s (its cheapest answer and the vLLM,
    SGLang and TensorRT-LLM lines that launch it)."""
    workload = tmp_path_factory.mktemp("search") / "w.yaml"
    workload.write_text(yaml.safe_dump({
        "seed": 5, "num_requests": 60, "arrivals": {"kind": "poisson", "rate_per_s": 1},
        "prompt_tokens": {"kind": "uniform", "low": 500, "high": 1500},
        "output_tokens": {"kind": "uniform", "low": 50, "high": 150}}))
    found = CliRunner().invoke(app, [
        "search", "llama-3.1-8b", "--workload", str(workload), "--rate", "6",
        "--slo-ttft", "500ms", "--slo-itl", "30ms", "--devices", "l4-24gb,a100-80gb",
        "--tp", "1,2", "--max-gpus", "4", "--max-num-seqs", "64",
        "--max-num-batched-tokens", "2048", "--disaggregate", "1:1", "--workers", "1",
        "--no-capacity", "--json"])
    assert found.exit_code == 0, found.output
    return json.loads(found.stdout)
