"""The step-model fit verify calls: it recovers known rates, overhead and spread."""

import random

import pytest

from servecap.ledger.errors import SpecError
from servecap.sim.calibrate import fit_step_model
from servecap.sim.roofline import Coefficients, override
from servecap.sim.step_model import prefill_pairs, step_s

CONSTANTS = {"weights_bytes": 2_000_000_000, "kv_bytes_per_token": 32_768,
             "flops_per_token": 2_000_000_000, "bandwidth_bytes_per_s": 1e12,
             "flops_per_s": 1e14, "attention_flops_per_token_pair": 262_144}


def _truth(**extra):
    return Coefficients(**CONSTANTS, step_overhead_s=0.002, gemm_efficiency=0.6,
                        attention_efficiency=0.4, bandwidth_efficiency=0.8, **extra)


def _samples(coef, noise=0.0, seed=3):
    rng, out = random.Random(seed), []
    for prompt in (64, 256, 1024, 2048, 4096):
        pairs = prefill_pairs(0, prompt)
        out.append({"num_prefill_tokens": prompt, "num_decode_tokens": 0,
                    "prefill_attention_tokens": pairs, "decode_context_tokens": 0,
                    "num_seqs": 1, "duration_s": step_s(coef, prompt, 0, pairs, 0)})
    for batch in (1, 4, 16, 64):
        for context in (128, 1024, 8192):
            live = batch * context
            out.append({"num_prefill_tokens": 0, "num_decode_tokens": batch,
                        "prefill_attention_tokens": 0, "decode_context_tokens": live,
                        "num_seqs": batch, "duration_s": step_s(coef, 0, batch, 0, live)})
    for sample in out:
        sample["duration_s"] *= 1 + rng.gauss(0, noise)
    return out


def test_fit_recovers_the_rates_and_overhead_that_made_the_steps():
    fit = fit_step_model(_samples(_truth()), CONSTANTS)
    coef = fit["coefficients"]
    assert coef["bandwidth_bytes_per_s"] == pytest.approx(0.8e12, rel=1e-6)
    assert coef["flops_per_s"] == pytest.approx(0.6e14, rel=1e-6)
    assert coef["attention_flops_per_s"] == pytest.approx(0.4e14, rel=1e-6)
    assert coef["step_overhead_s"] == pytest.approx(0.002, rel=1e-6)
    assert fit["residual_cv"] < 1e-9


def test_the_fit_feeds_the_simulator_and_predicts_the_steps():
    """What the fit returns is a coefficients file: override() takes it, and the simulator's
    step times then match the measured ones."""
    samples = _samples(_truth(), noise=0.05)
    fit = fit_step_model(samples, CONSTANTS)
    assert 0.02 < fit["residual_cv"] < 0.1  # the 5 % noise, as step_time_cv
    base = Coefficients(**CONSTANTS)
    coef = override(base, fit["coefficients"], "measured")
    for s in samples:
        predicted = step_s(coef, s["num_prefill_tokens"], s["num_decode_tokens"],
                           s["prefill_attention_tokens"], s["decode_context_tokens"])
        assert predicted == pytest.approx(s["duration_s"], rel=0.2)


def test_bad_samples_are_named():
    with pytest.raises(SpecError, match=r"samples\[0\].duration_s"):
        fit_step_model([{"duration_s": -1}] * 3, CONSTANTS)
    with pytest.raises(SpecError, match="at least 3"):
        fit_step_model(_samples(_truth())[:2], CONSTANTS)


def test_the_fit_written_as_json_is_a_coefficients_file_simulate_reads(tmp_path):
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app

    path = tmp_path / "fit.json"
    path.write_text(json.dumps(fit_step_model(_samples(_truth(), noise=0.05), CONSTANTS)))
    out = CliRunner().invoke(app, ["simulate", "llama-3.2-1b-instruct", "--device",
                                   "h100-80gb", "--workload", "workloads/chat.yaml",
                                   "--coefficients", str(path), "--json"])
    assert out.exit_code == 0, out.output
    coef = json.loads(out.stdout)["coefficients"]
    assert coef["source"] == f"measured: {path}" and 0.02 < coef["step_time_cv"] < 0.1
    assert coef["bandwidth_bytes_per_s"] == pytest.approx(0.8e12, rel=0.1)


def test_each_rates_interval_holds_the_truth_in_95_percent_of_noisy_fits():
    """Fits of 5 %-noisy steps over 150 seeds: each 95 % interval holds the rate that made the
    steps in about 95 % of them (3 binomial standard deviations: 89.7-100 %); a fit that calls
    a rate underdetermined (rarely, here) makes no claim about it."""
    truth = {"bandwidth_bytes_per_s": 0.8e12, "flops_per_s": 0.6e14,
             "attention_flops_per_s": 0.4e14, "step_overhead_s": 0.002}
    hits, seeds, unpinned = dict.fromkeys(truth, 0), 150, 0
    for seed in range(seeds):
        fit = fit_step_model(_samples(_truth(), noise=0.05, seed=seed), CONSTANTS)
        unpinned += bool(fit["underdetermined"])
        for name, value in truth.items():  # a rate the fit calls underdetermined: no claim
            low, high = fit["intervals"].get(name, (0.0, float("inf")))
            hits[name] += low <= value <= high
    assert unpinned <= 0.05 * seeds
    for name, hit in hits.items():
        assert 0.897 <= hit / seeds <= 1.0, (name, hit / seeds)


def test_steps_of_one_shape_leave_rates_underdetermined_never_silently_at_the_peak():
    """The declared load alone: one prefill and decode steps that all look alike. The fit
    names what it could not pin instead of holding it at the peak it started from."""
    coef = _truth()
    steps = [{"num_prefill_tokens": 0, "num_decode_tokens": 8, "prefill_attention_tokens": 0,
              "decode_context_tokens": 8 * (500 + i), "num_seqs": 8,
              "duration_s": step_s(coef, 0, 8, 0, 8 * (500 + i)) * (1 + 0.01 * (i % 3))}
             for i in range(15)]
    fit = fit_step_model(steps, CONSTANTS)
    assert fit["underdetermined"]
    for name in fit["underdetermined"]:
        assert name not in fit["intervals"]
    peaks = {"bandwidth_bytes_per_s": CONSTANTS["bandwidth_bytes_per_s"],
             "flops_per_s": CONSTANTS["flops_per_s"]}
    for name, peak in peaks.items():  # a rate the fit could not pin is named, not kept
        assert fit["coefficients"][name] != peak or name in fit["underdetermined"]


def test_a_stall_is_dropped_by_the_stated_rule():
    samples = _samples(_truth(), noise=0.01)
    stalled = [dict(s) for s in samples]
    stalled[3]["duration_s"] *= 20  # a garbage-collector pause inside one step
    clean, fit = fit_step_model(samples, CONSTANTS), fit_step_model(stalled, CONSTANTS)
    assert fit["num_outliers"] >= 1 and clean["num_outliers"] == 0
    for key in ("bandwidth_bytes_per_s", "flops_per_s", "step_overhead_s"):
        assert fit["coefficients"][key] == pytest.approx(clean["coefficients"][key], rel=0.05)


def test_a_memory_term_no_step_is_bound_by_gives_a_lower_bound_on_the_bandwidth():
    """Compute-bound steps only: the bandwidth is underdetermined, and set to the slowest at
    which still no step would be memory-bound."""
    fast = _truth()
    steps = [s for s in _samples(fast)
             if s["num_prefill_tokens"] >= 1024]  # long prefills: compute-bound
    fit = fit_step_model(steps, CONSTANTS)
    assert "bandwidth_bytes_per_s" in fit["underdetermined"]
    coef = override(Coefficients(**CONSTANTS), fit["coefficients"], "fit")
    from servecap.sim.step_model import terms

    for s in steps:
        parts = terms(coef, s["num_prefill_tokens"], 0, s["prefill_attention_tokens"], 0)
        assert parts["memory_s"] <= parts["gemm_s"] + parts["attention_s"] * (1 + 1e-9)


def test_an_overhead_fitted_below_zero_is_held_at_zero_and_the_rates_refitted():
    """Steps that follow the rates less a fixed time: clipping the overhead after the fit
    would keep rates that leaned on it and price every step slower than measured."""
    samples = _samples(_truth())
    for s in samples:
        s["duration_s"] -= 0.003  # the 2 ms overhead and 1 ms more off every step
    assert min(s["duration_s"] for s in samples) > 0
    fit = fit_step_model(samples, CONSTANTS)
    assert fit["coefficients"]["step_overhead_s"] == 0
    assert "held at 0" in fit["underdetermined"]["step_overhead_s"]
    coef = override(Coefficients(**CONSTANTS), fit["coefficients"], "measured")
    errors = [step_s(coef, s["num_prefill_tokens"], s["num_decode_tokens"],
                     s["prefill_attention_tokens"], s["decode_context_tokens"])
              / s["duration_s"] - 1 for s in samples]
    assert min(errors) < 0 < max(errors)  # a fit through the steps, not above all of them
