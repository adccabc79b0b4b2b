"""The calibration fit: step samples in, the simulator's coefficients and a step model out."""

import pytest

from servecap.runtime.calibration import StepSample, fit_coefficients, step_model

W, KV, F = 400_000, 512, 200_000  # weights bytes, KV bytes per token, FLOPs per token
TRUE = {"bandwidth_bytes_per_s": 50e6, "flops_per_s": 1e9, "step_overhead_s": 0.004}


def _sample(prefill: int, decodes: int, context: int) -> StepSample:
    """A step timed exactly as the simulator prices it, with these true rates."""
    n = prefill + decodes
    moved = W + KV * (decodes * context + n - decodes)
    t = max(F * n / TRUE["flops_per_s"], moved / TRUE["bandwidth_bytes_per_s"]) \
        + TRUE["step_overhead_s"]
    return StepSample(t, prefill, decodes, prefill * (prefill + 1) // 2,
                      decodes * (context + 1), decodes + (1 if prefill else 0))


SAMPLES = [_sample(p, d, c) for p, d, c in [
    (0, 1, 40), (0, 4, 80), (0, 9, 120), (0, 16, 200), (0, 30, 90), (64, 0, 0),
    (128, 3, 60), (256, 8, 100), (512, 2, 30), (32, 20, 150)]]


def test_rates_that_priced_the_steps_are_found_again() -> None:
    coef = fit_coefficients(SAMPLES, W, KV, F)["coefficients"]
    for key, value in TRUE.items():
        assert coef[key] == pytest.approx(value, rel=0.08), key


def test_step_model_reports_residuals_per_kind_and_keeps_every_sample() -> None:
    out = fit_coefficients(SAMPLES, W, KV, F)
    assert len(out["steps"]) == len(SAMPLES)
    assert set(out["steps"][0]) == {"duration_s", "num_prefill_tokens", "num_decode_tokens",
                                    "prefill_attention_tokens", "decode_context_tokens",
                                    "num_seqs"}
    residuals = out["fit"]["step_model"]["residuals"]
    assert set(residuals) == {"prefill", "decode", "mixed", "all"}
    assert all(r["p95_pct"] >= r["p50_pct"] >= 0 for r in residuals.values())


def test_a_linear_step_time_is_explained_exactly() -> None:
    samples = [StepSample(0.002 + 1e-5 * p + 1e-8 * a + 2e-4 * d + 1e-6 * c, p, d, a, c, 1)
               for p, d, a, c in [(0, 1, 0, 10), (0, 5, 0, 300), (0, 9, 0, 900), (40, 0, 820, 0),
                                  (80, 2, 3240, 100), (16, 7, 136, 2000), (0, 3, 0, 50)]]
    out = step_model(samples)
    assert out["intercept_s"] == pytest.approx(0.002, abs=1e-6)
    assert out["seconds_per"]["num_decode_tokens"] == pytest.approx(2e-4, rel=1e-3)
    assert out["residuals"]["all"]["p95_pct"] < 0.01
