"""Verification arithmetic: pool sizing, residuals, verdicts and the violated line named."""

from dataclasses import replace

from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.verification import (
    OK,
    REPORTED,
    Measured,
    block_bytes,
    kv_pool_blocks,
    kv_pool_bytes,
    reconcile,
)
from servecap.model_configs import load_model

MiB = 2**20


def _plan():
    serve = ServeSpec(device_bytes=4 * MiB, context_tokens=256, concurrency=4,
                      runtime_peak_bytes=MiB, safety_bytes=int(0.1 * 4 * MiB),
                      weight_dtype="fp32", kv_dtype="fp32", activation_dtype="fp32")
    return build_plan(load_model("tiny-llama").spec, serve)


def _exact_run(plan) -> Measured:
    """What a run that matched the plan everywhere would measure."""
    return Measured(
        weights_bytes=plan.line("weights"), weight_metadata_bytes=0,
        runtime_peak_bytes=plan.line("runtime_peak") // 2, kv_pool_bytes=kv_pool_bytes(plan),
        kv_in_use_bytes=plan.line("kv_cache"), non_torch_bytes=0, allocator_slack_bytes=0,
        peak_used_bytes=plan.device_bytes - plan.line("safety"),
        ceiling_requests=plan.memory_ceiling_requests, num_requests=4)


def test_pool_holds_exactly_the_ceiling_at_the_declared_context() -> None:
    plan = _plan()
    # tiny-llama fp32: 2 [K,V] x 2 layers x 2 heads x 16 x 4 B = 512 B/token; 16-token blocks
    assert block_bytes(plan) == 512 * 16
    blocks = kv_pool_blocks(plan)
    assert blocks == (4 * MiB - plan.fixed_bytes) // 8192 == 280
    assert blocks // (256 // 16) == plan.memory_ceiling_requests == 17
    assert kv_pool_bytes(plan) == (280 + 1) * 8192


def test_a_run_that_matches_the_plan_has_no_violation() -> None:
    plan = _plan()
    result = reconcile(plan, _exact_run(plan))
    assert result.violations == ()
    verdicts = {c.line: c.verdict for c in result.lines}
    assert verdicts == {"weights": OK, "weight_metadata": OK, "runtime_peak": OK, "kv_pool": OK,
                        "kv_cache": OK, "safety": OK, "non_torch": REPORTED,
                        "allocator_slack": REPORTED}
    weights = result.lines[0]
    assert (weights.residual_bytes, weights.residual_pct) == (0, 0.0)


def test_each_broken_line_is_named() -> None:
    plan = _plan()
    good = _exact_run(plan)
    cases = {
        "weights": replace(good, weights_bytes=good.weights_bytes + 2),
        "runtime_peak": replace(good, runtime_peak_bytes=plan.line("runtime_peak") + 1),
        "kv_pool": replace(good, kv_pool_bytes=good.kv_pool_bytes - 8192),
        "kv_cache": replace(good, kv_in_use_bytes=good.kv_in_use_bytes + 8192),
        "safety": replace(good, peak_used_bytes=plan.device_bytes + 1),
        "memory_ceiling": replace(good, ceiling_requests=16),
    }
    for name, measured in cases.items():
        assert reconcile(plan, measured).violations == (name,), name


def test_kv_in_use_may_be_one_block_per_request_short() -> None:
    plan = _plan()
    good = _exact_run(plan)
    short = replace(good, kv_in_use_bytes=good.kv_in_use_bytes - 4 * 8192)
    assert reconcile(plan, short).violations == ()
    too_short = replace(short, kv_in_use_bytes=short.kv_in_use_bytes - 1)
    assert reconcile(plan, too_short).violations == ("kv_cache",)


def test_residual_percent_is_none_without_a_prediction() -> None:
    plan = _plan()
    slack = reconcile(plan, replace(_exact_run(plan), allocator_slack_bytes=4096)).lines[-1]
    assert (slack.line, slack.residual_bytes, slack.residual_pct) == ("allocator_slack", 4096,
                                                                       None)
