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
