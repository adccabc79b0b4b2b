"""verify's calibration: step samples in, the simulator's own step-model fit out."""

import pytest

from servecap.runtime.calibration import StepSample, calibrate, calibration_file
from servecap.sim.calibrate import fit_step_model
from servecap.sim.roofline import Coefficients
from servecap.sim.step_model import prefill_pairs, step_s

CONSTANTS = {"weights_bytes": 400_000, "kv_bytes_per_token": 512, "flops_per_token": 200_000,
             "bandwidth_bytes_per_s": 20e9, "flops_per_s": 100e9,
             "attention_flops_per_token_pair": 256}
TRUE = Coefficients(**CONSTANTS, step_overhead_s=0.004, gemm_efficiency=0.01,
                    attention_efficiency=0.02, bandwidth_efficiency=0.0025)


def _sample(prefill: int, decodes: int, context: int) -> StepSample:
    """A step timed exactly as the simulator prices it, with the TRUE coefficients."""
    pairs, live = prefill_pairs(0, prefill), decodes * context
    return StepSample(step_s(TRUE, prefill, decodes, pairs, live), prefill, decodes, pairs,
                      live, decodes + (1 if prefill else 0))


SAMPLES = [_sample(p, d, c) for p, d, c in [
    (0, 1, 40), (0, 4, 80), (0, 9, 120), (0, 16, 200), (0, 30, 90), (64, 0, 0),
    (128, 3, 60), (256, 8, 100), (512, 2, 30), (32, 20, 150), (1024, 0, 0)]]


def test_calibration_is_the_simulators_fit_with_the_replay_and_every_sample() -> None:
    out = calibrate(SAMPLES, CONSTANTS)
    assert calibration_file(out) == fit_step_model([s.as_dict() for s in SAMPLES], CONSTANTS)
    coef = out["coefficients"]
    assert coef["bandwidth_bytes_per_s"] == pytest.approx(20e9 * 0.0025, rel=1e-6)
    assert coef["step_overhead_s"] == pytest.approx(0.004, rel=1e-6)
    assert out["fit"]["replayed_step_ms"] == pytest.approx(out["fit"]["measured_step_ms"])
    assert len(out["steps"]) == len(SAMPLES)
    assert set(out["steps"][0]) == {"duration_s", "num_prefill_tokens", "num_decode_tokens",
                                    "prefill_attention_tokens", "decode_context_tokens",
                                    "num_seqs"}


def test_too_few_steps_give_no_coefficients_and_say_why() -> None:
    out = calibrate(SAMPLES[:2], CONSTANTS)
    assert out["coefficients"] == {}
    assert "at least 3" in out["fit"]["note"] and len(out["steps"]) == 2


def test_calibration_loads_span_batch_sizes_and_prefill_lengths() -> None:
    from servecap.runtime.calibration import calibration_loads

    loads = calibration_loads(512, 8, 8000)
    prompts = {a.prompt_tokens for load in loads if len(load) == 1 for a in load}
    batches = {len(load) for load in loads}
    assert {32, 64, 128, 256, 510} <= prompts  # prefill lengths: tokens apart from pairs
    assert {1, 2, 4, 8} <= batches  # decode batches: tokens apart from the fixed cost
    for load in loads:
        assert sum(a.prompt_tokens + a.output_tokens for a in load) <= 8000
        assert all(a.prompt_tokens + a.output_tokens <= 512 for a in load)
    seeds = [a.seed for load in loads for a in load]
    assert len(set(seeds)) == len(seeds)  # no two share a prompt (no prefix hits)
    assert len(calibration_loads(512, 8, 300)) < len(loads)  # what the pool cannot hold


def test_verify_pins_every_rate_or_says_the_fit_is_underdetermined() -> None:
    """The default-sized run (tiny-llama, 8 requests of 512 tokens, 256 MiB): no rate is left
    at the nominal peak the fit starts from unless its reason says so, and the simulated p50s
    either agree with the measured ones within 25 % or verify says why it predicts nothing.
    The p50s are timings of this machine's CPU, which other processes share: a run whose
    load was slowed after its calibration sweep (CI once measured a TTFT p50 of 95 ms against
    63 simulated) is run once more, and the bound holds for the second; a model that is
    wrong misses it twice."""
    misses = []
    for _ in range(2):
        miss = _verify_run_miss()
        if miss is None:
            return
        misses.append(miss)
    raise AssertionError(f"simulated p50 off by more than 25 % in both runs: {misses}")


def _verify_run_miss() -> str | None:
    """One verify run checked as above: None where it holds, else what missed."""
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app
    from servecap.runtime.calibration import NOMINAL_BANDWIDTH_BYTES_PER_S, NOMINAL_FLOPS_PER_S

    out = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu",
                                   "--device-memory", "256MiB", "--context", "512",
                                   "--concurrency", "8", "--no-probe", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    calibration = report["calibration"]
    coef = calibration["coefficients"]
    assert calibration["num_samples"] > 16  # the sweep's steps beside the load's
    assert coef["bandwidth_bytes_per_s"] != NOMINAL_BANDWIDTH_BYTES_PER_S
    for key in ("flops_per_s", "attention_flops_per_s"):  # CPU noise may leave one unfitted
        assert coef[key] != NOMINAL_FLOPS_PER_S or \
            "left at the 100 GFLOP/s" in calibration["underdetermined"][key]
    check = report["latency"]["simulated_vs_measured"]
    if check["verdict"] == "underdetermined":
        assert check["underdetermined"] == calibration["underdetermined"] != {}
        assert report["simulation_verdict"] == "underdetermined"
        return None
    p50s = {metric: (check[metric]["simulated"]["p50"], check[metric]["measured"]["p50"])
            for metric in ("ttft_ms", "itl_ms", "e2e_ms")}
    off = {metric: pair for metric, pair in p50s.items()
           if abs(pair[0] - pair[1]) > 0.25 * pair[1]}
    return f"(simulated, measured) {off}" if off else None


MEMORY_BOUND = [_sample(0, d, c) for d in (1, 2, 4, 8) for c in (64, 128, 256)]


def test_a_compute_rate_no_step_pinned_says_it_stays_at_the_starting_value(tmp_path) -> None:
    """Decode steps only, every one memory-bound: nothing measures the GEMM rate. The file
    keeps the 100 GFLOP/s the fit started from (its residuals were taken with it there, and a
    device given by size takes its FLOPS from the file), and says so in its reason; it
    wrote 'flops_per_s: 100000000000.0' with a reason naming only the failed term."""
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app

    out = calibrate(MEMORY_BOUND, CONSTANTS)
    assert out["coefficients"]["flops_per_s"] == CONSTANTS["flops_per_s"]
    reason = out["underdetermined"]["flops_per_s"]
    assert reason.endswith("left at the 100 GFLOP/s the fit starts from, not a measurement")
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_file(out)))
    sim = CliRunner().invoke(app, ["simulate", "tiny-llama", "--device", "16MiB",
                                   "--coefficients", str(path), "--workload",
                                   "workloads/chat.yaml", "--num-requests", "4", "--json"])
    assert sim.exit_code == 0, sim.output
    source = json.loads(sim.stdout)["coefficients"]["source"]
    assert "flops_per_s not fitted, left at the 100 GFLOP/s the fit starts from" in source
    text = CliRunner().invoke(app, ["simulate", "tiny-llama", "--device", "16MiB",
                                    "--coefficients", str(path), "--workload",
                                    "workloads/chat.yaml", "--num-requests", "4"])
    assert "flops_per_s not fitted, left at the 100 GFLOP/s" in " ".join(text.stdout.split())
