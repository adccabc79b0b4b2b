"""One label per fact: a calibrated step model is called measured everywhere, the decode bound
comes from the step model the simulation runs, counts are singular at 1, and load's HTTP
statuses read as a person writes them."""

import json

import pytest

from servecap.cli.load_view import counts
from servecap.ledger.units import plural
from servecap.sim.roofline import Coefficients
from servecap.sim.step_model import step_s

FIXED = ("--input-len", "512", "--output-len", "64", "--rate", "4")


def _simulate(run, *extra):
    return run("simulate", "teaching-7b", "--device", "h100-80gb", *FIXED, *extra)


def test_measured_coefficients_are_not_called_speed_of_light(run, tmp_path) -> None:
    path = tmp_path / "coef.json"
    path.write_text(json.dumps({"bandwidth_bytes_per_s": 1.5e12, "flops_per_s": 5e14,
                                "step_overhead_s": 0.002}))
    result = _simulate(run, "--coefficients", path, "--num-requests", "20")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "speed of light" not in text and "uncalibrated" not in text and "roofline" not in text
    assert f"step model: measured: {path} (calibrated)" in text
    report = json.loads(_simulate(run, "--coefficients", path, "--num-requests", "20",
                                  "--json").stdout)
    assert report["coefficients"]["efficiency_source"] == f"measured: {path} (calibrated)"


@pytest.mark.parametrize("extra", [(), ("--speed-of-light",)])
def test_the_decode_bound_is_the_simulated_step(run, extra) -> None:
    report = json.loads(_simulate(run, "--num-requests", "20", "--json", *extra).stdout)
    coef = Coefficients(**report["coefficients"])
    bound = report["decode_bound_tokens_per_s"]
    assert bound == pytest.approx(1 / step_s(coef, 0, 1, 0, 0))
    bare = coef.bandwidth_bytes_per_s / coef.weights_bytes  # the seed's speed-of-light bound
    if extra:
        assert bound == pytest.approx(bare, rel=1e-4)
    else:  # the fitted table's bandwidth share and overheads lower it
        assert bound < 0.85 * bare


def test_one_request_is_singular(run) -> None:
    out = " ".join(_simulate(run, "--num-requests", "1").stdout.split())
    assert "| 1 request " in out and "1 requests" not in out


def test_plural() -> None:
    assert [plural(n, "GPU") for n in (0, 1, 2, 1000)] == ["0 GPUs", "1 GPU", "2 GPUs",
                                                           "1,000 GPUs"]


def test_http_counts_read_as_written() -> None:
    assert counts({"200": 8}) == "200: 8"
    assert counts({"200": 1200, "503": 1}) == "200: 1,200, 503: 1"
    assert counts({}) == ""


def test_a_hybrids_state_line_for_one_request_is_singular(run) -> None:
    out = run("plan", "qwen3.6-35b-a3b", "--device", "h100-80gb", "--concurrency", "1",
              "--context", "4096", "--json")
    line = next(ln for ln in json.loads(out.stdout)["lines"] if ln["key"] == "state_cache")
    assert line["from"].startswith("1 request x ")


def test_blocks_title_counts_one_sequence(run) -> None:
    out = " ".join(run("blocks", "17").stdout.split())
    assert "paging 1 sequence, Σ 17 tokens" in out


def test_search_names_the_step_model_as_simulate_does(run, tmp_path) -> None:
    from pathlib import Path

    chat = (Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml").read_text()
    workload = tmp_path / "w.yaml"
    workload.write_text(chat.replace("num_requests: 2000", "num_requests: 60"))
    searched = run("search", "llama-3.1-8b", "--workload", workload, "--rate", "2",
                   "--slo-ttft", "1s", "--slo-tpot", "50ms", "--devices", "h100-80gb", "--tp", "1",
                   "--max-gpus", "1", "--workers", "1", "--json")
    simulated = json.loads(_simulate(run, "--num-requests", "20", "--json").stdout)
    source = simulated["coefficients"]["efficiency_source"]
    assert searched.exit_code in (0, 1), searched.output
    assert f"step model on h100-80gb: {source}" in json.loads(searched.stdout)["time_model_notes"]
