"""Prediction intervals (sim/model_error.py): the sampling interval widened by the model's own
out-of-sample error, in simulate's JSON beside the *_ci keys it already prints."""

import json
import math
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.sim import model_error
from servecap.sim.model_error import MODEL_ERROR, _widen, prediction_interval

ROOT = Path(__file__).resolve().parents[2]
FAMILY = {"log_q025": -0.2, "log_q975": 0.4}  # over-predicts by up to e^0.4, under by e^0.2


def test_a_scalar_widens_by_the_error_quantiles_around_its_sampling_interval() -> None:
    low, high = _widen(100.0, [90.0, 110.0], FAMILY)
    assert math.isclose(low, 90 * math.exp(-0.4), rel_tol=1e-6)
    assert math.isclose(high, 110 * math.exp(0.2), rel_tol=1e-6)


def test_a_latency_widens_its_median_and_mean_and_leaves_tails_out() -> None:
    value = {"p50": 200.0, "mean": 220.0, "p99": 900.0}
    ci = {"p50": [190.0, 210.0], "mean": [200.0, 240.0], "p99": [800.0, 1000.0]}
    out = _widen(value, ci, FAMILY)
    assert set(out) == {"p50", "mean"}
    assert out["p50"][0] < 190 < 210 < out["p50"][1]
    # no sampling interval: the estimate itself is widened
    alone = _widen({"p50": 200.0}, None, FAMILY)["p50"]
    assert math.isclose(alone[0], 200 * math.exp(-0.4), rel_tol=1e-3)


def test_plain_runs_say_why_they_have_no_prediction_interval() -> None:
    out = prediction_interval({"ttft_ms": {"p50": 10.0}}, "plain")
    assert out["available"] is False and "plain" in out["why"]


def test_the_shipped_error_is_measured_out_of_sample_on_many_sources() -> None:
    families = MODEL_ERROR["families"]
    assert {"ttft", "tpot", "throughput"} <= set(families)
    for fam in families.values():
        assert fam["log_q025"] <= fam["log_q975"] and fam["comparisons"] >= 20
    assert MODEL_ERROR["sources"] >= 8 and MODEL_ERROR["runs"] >= 60
    assert model_error.FIT_FILE.name == "engine_fit.json"


def test_simulate_json_carries_a_prediction_interval_around_each_estimate() -> None:
    out = CliRunner().invoke(app, [
        "simulate", "llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm==0.15",
        "--num-requests", "60", "--rate", "4", "--input-len", "256", "--output-len", "64",
        "--json"])
    assert out.exit_code == 0, out.output
    entry = json.loads(out.stdout)["policies"][0]
    pred = entry["prediction_interval"]
    assert pred["available"] and pred["confidence"] == 0.95
    for key in ("ttft_ms", "tpot_ms"):
        low, high = pred[key]["p50"]
        sampling = entry[f"{key}_ci"]["p50"]
        assert low <= sampling[0] <= entry[key]["p50"] <= sampling[1] <= high
    assert "ttft_ms_ci" in entry  # the sampling interval keeps its name
