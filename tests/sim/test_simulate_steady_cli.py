"""simulate in `vllm bench serve`'s words (--rate, --num-requests, --input-len/--output-len,
--seeds) and the measured window in its JSON and tables."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

INLINE = ["--device", "80GiB", "--bandwidth", "2000GB/s", "--flops", "990TFLOPS"]
SHAPE = ["--input-len", "512", "--output-len", "64"]


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _entry(*args) -> dict:
    out = _invoke("simulate", "teaching-7b", *INLINE, *args, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["policies"][0]


def test_a_fixed_shape_at_a_rate_without_a_yaml() -> None:
    entry = _entry(*SHAPE, "--rate", "6", "--num-requests", "1500", "--slo-ttft", "1s")
    assert entry["offered"] == 1500 and entry["completed"] == 1500
    assert entry["offered_rps"] == pytest.approx(6, rel=0.1)
    assert entry["steady_state"] is True and entry["measured_requests"] < 1500
    assert entry["warmup_requests"] + entry["measured_requests"] + \
        entry["drain_requests"] == 1500
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        for name in ("p50", "p99"):
            low, high = entry[f"{key}_ci"][name]  # None: a side too few requests bound
            assert (low is None or low <= entry[key][name]) and \
                (high is None or entry[key][name] <= high)
        assert None not in entry[f"{key}_ci"]["p50"]
    for key in ("goodput_rps", "slo_attainment"):
        low, high = entry[f"{key}_ci"]
        assert low <= entry[key] <= high


def test_without_a_rate_every_request_arrives_at_once_and_is_not_steady() -> None:
    """vllm bench serve's default --request-rate inf: a burst has no steady state."""
    entry = _entry(*SHAPE, "--num-requests", "50")
    assert entry["offered"] == 50 and entry["offered_rps"] is None
    assert entry["steady_state"] is False and entry["measured_requests"] == 50


def test_a_short_run_is_flagged_in_the_table_a_long_one_is_not() -> None:
    short = _invoke("simulate", "teaching-7b", *INLINE, *SHAPE, "--rate", "6",
                    "--num-requests", "40")
    assert short.exit_code == 0, short.output
    assert "not at steady state" in short.stdout and "±" in short.stdout
    long = _invoke("simulate", "teaching-7b", *INLINE, *SHAPE, "--rate", "6",
                   "--num-requests", "1500")
    assert long.exit_code == 0 and "not at steady state" not in long.stdout
    assert "measured at steady state" in long.stdout


def test_the_window_line_gives_the_measured_requests_lifetimes() -> None:
    """The screen's lifetimes figure is --json's window_lifetimes (the requests measured),
    and a refused candidate window's figure comes only with its own name."""
    args = ("simulate", "teaching-7b", *INLINE, *SHAPE, "--rate", "6", "--num-requests", "40")
    entry = json.loads(_invoke(*args, "--json").stdout)["policies"][0]
    text = " ".join(_invoke(*args).stdout.split())
    assert f"spanning {entry['window_lifetimes']:.1f} request lifetimes;" in text
    candidate = entry["candidate_window_lifetimes"]
    assert candidate is None or "candidate window" in entry["steady_state_reason"]


def test_seeds_sample_the_step_time_spread() -> None:
    one = _entry(*SHAPE, "--rate", "6", "--num-requests", "600", "--step-time-cv", "0.3")
    three = _entry(*SHAPE, "--rate", "6", "--num-requests", "600", "--step-time-cv", "0.3",
                   "--seeds", "3")
    assert one["num_runs"] == 1 and three["num_runs"] == 3
    assert three["offered"] == 3 * one["offered"]
    assert three["measured_requests"] > 2 * one["measured_requests"]


def test_a_workload_takes_a_rate_and_a_count(tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps({"seed": 1, "num_requests": 100, "arrivals": {
        "kind": "gamma", "rate_per_s": 1, "cv": 2},
        "prompt_tokens": {"kind": "fixed", "value": 128},
        "output_tokens": {"kind": "fixed", "value": 16}}))
    entry = _entry("--workload", path, "--rate", "20", "--num-requests", "300")
    assert entry["offered"] == 300 and entry["offered_rps"] > 10


@pytest.mark.parametrize("args, needle", [
    (["--input-len", "512"], "--output-len"),
    (["--input-len", "0", "--output-len", "5"], "--input-len"),
    ([*SHAPE, "--rate", "-3"], "--rate"),
    ([*SHAPE, "--num-requests", "0"], "--num-requests"),
    ([*SHAPE, "--seeds", "0"], "--seeds"),
    (["--workload", "workloads/chat.yaml", *SHAPE], "not with one"),
])
def test_bad_load_flags_are_one_line_exit_2(args, needle) -> None:
    out = _invoke("simulate", "teaching-7b", *INLINE, *args)
    assert out.exit_code == 2 and needle in out.output, out.output
    assert "Traceback" not in out.output


def test_a_trace_keeps_its_own_arrivals(tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n0.1,50,3\n")
    out = _invoke("simulate", "teaching-7b", *INLINE, "--trace", trace, "--rate", "3")
    assert out.exit_code == 2 and "carries its own arrivals" in out.output
