"""The space, its flags, memory pruning monotone in context, and the replica ladder climb."""

from dataclasses import replace

import pytest

from servecap.ledger.errors import SpecError
from servecap.sim.search.memory import MemoryCheck, plan_layout
from servecap.sim.search.prices import DEFAULT_USD_PER_GPU_HOUR, parse_prices, price_table
from servecap.sim.search.prune import ABOVE, BELOW, climb
from servecap.sim.search.space import (
    Axes,
    Candidate,
    Layout,
    device_name,
    ladders,
    layouts,
    num_candidates,
    parse_counts,
    parse_dtypes,
    parse_ratios,
)


def test_every_candidate_fits_max_gpus_and_counts_add_up() -> None:
    axes = Axes(devices=("h100-80gb",), tensor_parallel_sizes=(1, 2, 4),
                pipeline_parallel_sizes=(1, 2), max_num_seqs=(64, 256),
                max_num_batched_tokens=(128, 2048), ratios=((1, 1), (1, 2)), max_gpus=8)
    lays = layouts(axes)
    assert all(lay.max_num_batched_tokens >= lay.max_num_seqs for lay in lays)
    assert len(lays) == 6 * 3  # tp x pp pairs: 6; (seqs, tokens) pairs kept (not 256/128): 3
    total = 0
    for lay in lays:
        for ladder in ladders(lay, axes):
            gpus = [c.num_gpus for c in ladder]
            assert gpus == sorted(set(gpus)) and max(gpus) <= 8
            total += len(ladder)
    assert total == num_candidates(axes)


def test_tp8_leaves_room_for_one_replica_and_no_pair() -> None:
    axes = Axes(devices=("h200-141gb",), tensor_parallel_sizes=(8,), ratios=((1, 1),),
                max_gpus=8)
    (lay,) = layouts(axes)
    assert ladders(lay, axes) == [[Candidate(lay, 1)]]


def test_flag_parsers() -> None:
    assert parse_counts("1,2,4-6", "--tp") == (1, 2, 4, 5, 6)
    assert parse_ratios("1:1, 2:3") == ((1, 1), (2, 3))
    assert parse_ratios("none") == ()
    assert device_name("h200") == "h200-141gb"
    assert device_name("H100-80GB") == "h100-80gb"
    for bad in ("0", "a", "3-1x", ""):
        with pytest.raises(SpecError):
            parse_counts(bad, "--tp")
    with pytest.raises(SpecError, match="a100-40gb or a100-80gb"):
        device_name("a100")
    with pytest.raises(SpecError):
        parse_ratios("1-1")


def test_kv_dtype_auto_is_the_models_dtype() -> None:
    """search prints vLLM's --kv-cache-dtype auto in its launch lines; read back, auto is the
    model's KV dtype (here bf16), listed once beside the others."""
    from servecap.ledger.dtypes import KV_DTYPES

    assert parse_dtypes("auto,fp8,bf16", "--kv-dtype", KV_DTYPES, "bf16") == ("bf16", "fp8")
    with pytest.raises(SpecError, match="--kv-dtype = 'auto'"):
        parse_dtypes("auto", "--kv-dtype", KV_DTYPES)  # no model dtype to stand for


def test_prices_default_labelled_and_overridable() -> None:
    table = price_table(("h200-141gb", "l4-24gb"), parse_prices(["h200=3.5"]))
    assert table["h200-141gb"] == {"usd_per_gpu_hour": 3.5, "source": "--gpu-price"}
    assert table["l4-24gb"]["usd_per_gpu_hour"] == DEFAULT_USD_PER_GPU_HOUR["l4-24gb"]
    assert "default" in table["l4-24gb"]["source"]
    for bad in (["h200"], ["h200=-1"], ["h200=abc"]):
        with pytest.raises(SpecError):
            parse_prices(bad)
    with pytest.raises(SpecError, match="searched"):
        price_table(("l4-24gb",), {"h200-141gb": 3.0})


def test_memory_fails_at_every_longer_context_without_a_ledger(small_problem) -> None:
    lay = Layout("l4-24gb", 1, 1, "bf16", "bf16", 64, 2048)
    check = MemoryCheck(small_problem)
    assert check.check(lay, 4096).fits
    failing = next(c for c in (2**k for k in range(13, 22)) if not check.check(lay, c).fits)
    used = check.num_ledgers
    for longer in (failing + 1, failing * 2, failing * 8):
        assert not check.check(lay, longer).fits
        assert not plan_layout(small_problem, lay, longer).fits  # the ledger agrees
    assert check.num_ledgers == used


def test_memory_fails_for_larger_scheduler_knobs_without_a_ledger(small_problem) -> None:
    check = MemoryCheck(small_problem)
    small = Layout("l4-24gb", 1, 1, "bf16", "bf16", 64, 2048)
    context = next(c for c in (2**k for k in range(13, 22)) if not check.check(small, c).fits)
    used = check.num_ledgers
    for seqs, tokens in ((64, 8192), (256, 2048), (256, 8192)):
        bigger = replace(small, max_num_seqs=seqs, max_num_batched_tokens=tokens)
        assert not check.check(bigger, context).fits
        assert not plan_layout(small_problem, bigger, context).fits  # the ledger agrees
    assert check.num_ledgers == used and check.num_inferred == 3
    assert check.check(replace(small, kv_dtype="fp8"), 4096).fits  # another base: a ledger


def test_tensor_parallel_shares_the_weights(small_problem) -> None:
    one = plan_layout(small_problem, Layout("l4-24gb", 1, 1, "bf16", "bf16", 64, 2048), 2048)
    two = plan_layout(small_problem, Layout("l4-24gb", 2, 1, "bf16", "bf16", 64, 2048), 2048)
    w1, w2 = (v.deployment.plan.line("weights") for v in (one, two))
    assert w1 / 2 <= w2 < w1 * 0.6  # each rank holds half, plus replicated norms/embeddings


def _ladder(n: int) -> list[Candidate]:
    lay = Layout("h100-80gb", 1, 1, "bf16", "bf16", 64, 2048)
    return [Candidate(lay, r) for r in range(1, n + 1)]


@pytest.mark.parametrize("first_pass", [0, 1, 3, 6, 7, 8])
def test_climb_finds_the_fewest_gpus_in_log_steps(first_pass: int) -> None:
    ladder, calls = _ladder(8), []

    def run(c):
        calls.append(c.replicas)
        return {"label": c.label, "meets_slo": c.replicas > first_pass}

    rows, skipped = climb(ladder, run)
    assert len(calls) <= 4  # ceil(log2(8 + 1))
    passing = [r for r in rows if r["meets_slo"]]
    if first_pass < 8:
        assert min(int(r["label"].rsplit("x", 1)[1]) for r in passing) == first_pass + 1
    assert len(rows) + sum(skipped.values()) == 8
    assert set(skipped) <= {ABOVE, BELOW}


def test_a_tp_that_does_not_divide_the_heads_is_invalid_not_a_memory_failure(
        small_problem) -> None:
    verdict = plan_layout(small_problem, Layout("h100-80gb", 3, 1, "bf16", "bf16", 64, 2048),
                          2048)
    assert not verdict.fits and verdict.reason.startswith("invalid")
