"""The roofline iteration time and the seed's single-stream decode bound, from real plans."""

import pytest

from servecap.cli.inputs import PlanFlags, model_for_flags, serve_spec
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import build_plan
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model
from servecap.sim.kvpool import pool_blocks
from servecap.sim.roofline import (
    coefficients,
    coefficients_for_plan,
    decode_bound_tokens_per_s,
    iteration_s,
    override,
)


def _plan(weight_dtype=None):
    loaded = load_model("teaching-7b")
    flags = PlanFlags(device="80GiB", weight_dtype=weight_dtype)
    return build_plan(model_for_flags(flags, loaded), serve_spec(flags, loaded))


def test_seed_decode_bound_comes_out_of_the_plan():
    """Seed 004: 14 GB at 2,000 GB/s -> ~143 tokens/s for one stream."""
    coef = coefficients_for_plan(_plan(), 2000e9, 990e12)
    assert decode_bound_tokens_per_s(coef) == pytest.approx(142.857, abs=0.01)
    one_token = iteration_s(coef, num_tokens=1, kv_tokens_read=0)
    assert 1 / one_token == pytest.approx(142.857, rel=1e-4)


def test_eight_bit_weights_double_the_bound():
    """Seed 004: the same 7B in 8-bit numbers is ~7 GB, lifting the bound to ~286 tokens/s."""
    spec = load_model("teaching-7b").spec
    weights = weight_bytes(spec, 8, None).param_bytes
    coef = coefficients(weights, 131_072, spec.num_parameters, 2000e9, 990e12)
    assert weights == 7_000_000_000
    assert decode_bound_tokens_per_s(coef) == pytest.approx(285.714, abs=0.01)


def test_flops_per_token_is_twice_the_active_parameters():
    assert coefficients_for_plan(_plan(), 2e12, 1e15).flops_per_token == 14_000_000_000


def test_long_prefill_is_compute_bound_and_decode_memory_bound(teaching):
    TEACHING = teaching
    prefill = iteration_s(TEACHING, 8192, 0) - TEACHING.step_overhead_s
    assert prefill == pytest.approx(14e9 * 8192 / 990e12, rel=1e-9)
    decode = iteration_s(TEACHING, 64, 64 * 1000) - TEACHING.step_overhead_s
    assert decode == pytest.approx((14e9 + 131_072 * (64_000 + 64)) / 2e12, rel=1e-9)


def test_overrides_replace_named_coefficients_only(teaching):
    TEACHING = teaching
    coef = override(TEACHING, {"step_overhead_s": 0.004, "bandwidth_bytes_per_s": 3e12}, "m")
    assert (coef.step_overhead_s, coef.bandwidth_bytes_per_s, coef.source) == (0.004, 3e12, "m")
    with pytest.raises(SpecError, match="unknown coefficient"):
        override(TEACHING, {"speed": 1}, "m")
    for endless in (float("inf"), float("nan")):  # an infinite step never ends the run
        with pytest.raises(SpecError, match="a finite number"):
            override(TEACHING, {"step_overhead_s": endless}, "m")


def test_pool_is_what_the_ledger_leaves_after_fixed_lines():
    plan = _plan()
    blocks = pool_blocks(plan, 16)
    assert blocks == (plan.device_bytes - plan.fixed_bytes) // (131_072 * 16)
