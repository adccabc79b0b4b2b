"""Speculative decoding: the expected-tokens formula and where the roofline says it pays."""

import pytest

from servecap.ledger.errors import SpecError
from servecap.sim.config import SchedulerConfig
from servecap.sim.metrics import summarize
from servecap.sim.roofline import Coefficients
from servecap.sim.run import simulate
from servecap.sim.speculative import (
    Speculation,
    break_even_batch,
    compare,
    expected_tokens_per_step,
)


@pytest.mark.parametrize("k, a, expected", [(4, 0.0, 1.0), (4, 1.0, 5.0), (1, 0.5, 1.5),
                                            (4, 0.7, (1 - 0.7**5) / 0.3)])
def test_expected_tokens_per_step(k, a, expected):
    assert expected_tokens_per_step(k, a) == pytest.approx(expected)


def test_helps_at_low_batch_and_stops_at_high_batch(teaching):
    draft = Coefficients(weights_bytes=1_000_000_000, kv_bytes_per_token=16_384,
                         flops_per_token=2_000_000_000, bandwidth_bytes_per_s=2e12,
                         flops_per_s=990e12, step_overhead_s=0.001)
    spec = Speculation(4, 0.7, draft)
    rows = compare(teaching, spec, [1, 4, 16, 64, 256, 1024], context_tokens=128)
    assert rows[0]["speedup"] > 1.5
    assert rows[-1]["speedup"] < 1
    assert rows[3]["speedup"] > rows[4]["speedup"] > rows[5]["speedup"]
    assert break_even_batch(rows) == 1024


def test_no_acceptance_never_pays(teaching):
    rows = compare(teaching, Speculation(3, 0.0, teaching), [1, 8], 512)
    assert all(r["speedup"] < 1 for r in rows)


@pytest.mark.parametrize("k, a", [(0, 0.5), (4, 1.5), (4, -0.1)])
def test_bad_speculation(teaching, k, a):
    with pytest.raises(SpecError):
        Speculation(k, a, teaching)


def _draft():
    return Coefficients(weights_bytes=1_000_000_000, kv_bytes_per_token=16_384,
                        flops_per_token=2_000_000_000, bandwidth_bytes_per_s=2e12,
                        flops_per_s=990e12, step_overhead_s=0.001)


def _run(teaching, reqs, spec):
    cfg = SchedulerConfig(speculation=spec, max_num_seqs=1024, max_num_batched_tokens=16384)
    return summarize(simulate(reqs, teaching, cfg, 20_000))


def test_simulated_speculation_helps_at_low_load_and_hurts_at_high_load(teaching,
                                                                        make_requests):
    short = {"prompt": {"kind": "uniform", "low": 32, "high": 128},
             "output": {"kind": "uniform", "low": 50, "high": 200}}
    light = make_requests(rate=1, n=100, **short)
    heavy = make_requests(rate=1000, n=3000, **short)
    spec = Speculation(4, 0.7, _draft())
    assert _run(teaching, light, spec)["tpot_ms"]["mean"] < \
        0.75 * _run(teaching, light, None)["tpot_ms"]["mean"]
    plain = _run(teaching, heavy, None)
    assert _run(teaching, heavy, spec)["output_tokens_per_s"] < plain["output_tokens_per_s"]
    capped = _run(teaching, heavy, Speculation(4, 0.7, _draft(), max_batch=64))
    assert capped["output_tokens_per_s"] >= plain["output_tokens_per_s"]


def test_cli_says_where_speculation_still_helps_when_no_compared_batch_breaks_even():
    from typer.testing import CliRunner

    from servecap.cli.app import app

    args = ["speculate", "llama-3.1-8b", "--device", "h100-80gb", "--draft",
            "llama-3.2-1b-instruct", "--batches", "4,1"]
    out = CliRunner().invoke(app, args).stdout
    assert "still helps at batch 4, the largest compared" in out
    out = CliRunner().invoke(app, [*args, "--acceptance", "0.3"]).stdout
    assert "stops helping at batch 1" in out


def _plans(context=1024):
    from servecap.cli.sim_inputs import SimFlags, rank_for

    flags = SimFlags(device="h100-80gb", context=context)
    return rank_for("llama-3.1-8b", flags).plan, rank_for("llama-3.2-1b-instruct", flags).plan


def test_the_draft_takes_its_weights_and_kv_from_the_targets_ceiling():
    from servecap.ledger.plan import memory_ceiling
    from servecap.sim.speculative import ceiling_with_draft

    target, draft = _plans()
    memory = ceiling_with_draft(target, draft)
    alone = target.memory_ceiling_requests  # plan's own ceiling at --context 1024
    assert memory["target_only_memory_ceiling_requests"] == alone > 400
    draft_weights = draft.line("weights") + draft.line("weight_metadata")
    assert memory["draft_weights_bytes"] == draft_weights
    assert memory["draft_kv_bytes_per_token"] == draft.kv_bytes_per_token
    expected = (target.device_bytes - target.fixed_bytes - draft_weights) // (
        target.kv_bytes_per_request + draft.kv_bytes_per_request)
    assert memory["memory_ceiling_requests"] == expected == memory_ceiling(
        target.device_bytes, target.fixed_bytes + draft_weights,
        target.kv_bytes_per_request + draft.kv_bytes_per_request)
    assert memory["memory_ceiling_requests"] < alone


def test_batches_past_the_ceiling_are_not_compared_and_the_ceiling_is():
    from servecap.sim.speculative import batches_within

    assert batches_within([1, 64, 256, 512], 340) == ([1, 64, 256, 340], [512])
    assert batches_within([1, 340, 512], 340) == ([1, 340], [512])
    assert batches_within([1, 8], 340) == ([1, 8], [])
    with pytest.raises(SpecError):
        batches_within([1], 0)


def test_cli_caps_batches_at_the_memory_ceiling_and_says_so():
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app

    args = ["speculate", "llama-3.1-8b", "--device", "h100-80gb", "--draft",
            "llama-3.2-1b-instruct", "--context", "1024"]
    report = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    plan = json.loads(CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--device", "h100-80gb",
                                               "--context", "1024", "--json"]).stdout)
    alone = plan["memory_ceiling_requests"]
    assert report["memory"]["target_only_memory_ceiling_requests"] == alone
    ceiling = report["memory"]["memory_ceiling_requests"]
    assert [r["batch"] for r in report["rows"]][-1] == ceiling < alone
    assert report["batches_beyond_ceiling"] == [512]
    out = CliRunner().invoke(app, args, terminal_width=80).stdout
    assert "not compared, beyond that ceiling: batch 512" in out
    assert "still helps at batch" not in out or "the memory ceiling" in out
    assert f"({alone:,} without)" in out


def test_simulate_admits_against_a_pool_the_draft_shares():
    from servecap.sim.kvpool import pool_blocks
    from servecap.sim.speculative import ceiling_with_draft, draft_fixed_bytes

    target, draft = _plans()
    alone, shared = pool_blocks(target, 16), pool_blocks(target, 16, draft)
    assert shared == (target.device_bytes - target.fixed_bytes - draft_fixed_bytes(draft)) // (
        (target.kv_bytes_per_token + draft.kv_bytes_per_token) * 16)
    # the pool shrinks as the ceiling does: 1,024-token requests, 64 blocks each
    assert shared // 64 == ceiling_with_draft(target, draft)["memory_ceiling_requests"]
    assert alone // 64 == target.memory_ceiling_requests


def test_simulate_reports_the_drafts_share_of_the_pool(tmp_path):
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app

    work = tmp_path / "w.yaml"
    work.write_text(json.dumps({"seed": 1, "num_requests": 5, "arrivals": {
        "kind": "poisson", "rate_per_s": 2}, "prompt_tokens": {"kind": "fixed", "value": 64},
        "output_tokens": {"kind": "fixed", "value": 8}}))
    args = ["simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload", str(work),
            "--json"]
    plain = json.loads(CliRunner().invoke(app, args).stdout)["kv_pool"]
    drafted = json.loads(CliRunner().invoke(
        app, [*args, "--draft", "llama-3.2-1b-instruct"]).stdout)["kv_pool"]
    assert drafted["num_blocks"] < plain["num_blocks"]
    assert drafted["pool_bytes"] == plain["pool_bytes"] - drafted["draft_weights_bytes"]
    assert drafted["draft_kv_bytes_per_token"] == 32_768


def test_a_draft_too_big_for_the_device_names_the_device_and_the_bytes():
    """An 8B target with a 70B draft on one H100 said '--context is missing: room for one
    request' although --context was given: the device is what is too small. The bytes named
    are the ledger's: the target's fixed lines, the draft's weights, one request's KV of
    both."""
    from typer.testing import CliRunner

    from servecap.cli.app import app
    from servecap.cli.sim_inputs import SimFlags, rank_for
    from servecap.ledger.units import fmt_gib

    flags = SimFlags(device="h100-80gb", context=1024)
    target = rank_for("llama-3.1-8b", flags).plan
    draft = rank_for("llama-3.1-70b-instruct", flags).plan
    needed = target.fixed_bytes + draft.line("weights") + draft.line("weight_metadata") + \
        target.kv_bytes_per_request + draft.kv_bytes_per_request
    assert needed > target.device_bytes  # 70B of bf16 weights alone exceed 80 GB
    out = CliRunner().invoke(app, ["speculate", "llama-3.1-8b", "--device", "h100-80gb",
                                   "--draft", "llama-3.1-70b-instruct", "--context", "1024"])
    assert out.exit_code == 2
    assert out.stderr.strip() == (
        "servecap: error: --device = 'h100-80gb': the target, the draft and one 1,024-token "
        f"request do not fit (need {fmt_gib(needed)}; the device has "
        f"{fmt_gib(target.device_bytes)}): a larger device, a smaller draft or model, or -tp")
    assert fmt_gib(target.device_bytes) == "79.19 GiB"  # 85,028,896,768 B, CUDA's figure
