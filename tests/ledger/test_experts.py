"""Routed experts across data-parallel ranks as vLLM's FusedMoE splits them
(fused_moe/config.py FusedMoEParallelConfig.make, layer.py determine_expert_map, v0.21.0):
over every rank of tp x dp, whole experts with --enable-expert-parallel, else each expert's
width; attention and the dense part stay per replica."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.arch import inventory
from servecap.ledger.errors import SpecError
from servecap.ledger.experts import ExpertSplit
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.serve import ServeSpec
from servecap.ledger.sharding import rank_inventory
from servecap.ledger.units import GiB
from servecap.model_configs import load_model

SERVE = ServeSpec(context_tokens=4096, concurrency=1, device_bytes=141 * GiB,
                  safety_bytes=0, weight_dtype="bf16")


def expert_params(groups) -> int:
    return sum(g.numel for g in groups if g.name == "mlp.experts")


def other_params(groups) -> int:
    return sum(g.numel for g in groups if g.name not in ("mlp.experts", "mlp.experts.bias"))


def test_expert_parallel_over_data_parallel_ranks_holds_an_eighth_of_the_experts() -> None:
    spec = load_model("qwen3-30b-a3b").spec  # 128 experts, 48 MoE layers
    whole = inventory(spec)
    rank = rank_inventory(spec, 1, experts=ExpertSplit.of(1, 8, True))
    assert expert_params(rank) * 8 == expert_params(whole)
    assert other_params(rank) == other_params(whole)  # attention replicated per DP rank
    one = next(g for g in rank if g.name == "mlp.experts")
    assert one.count == 3 * 128 // 8 and one.rows == spec.moe.expert_intermediate_size


def test_without_the_flag_each_expert_is_cut_across_tp_x_dp() -> None:
    spec = load_model("qwen3-30b-a3b").spec
    rank = rank_inventory(spec, 2, experts=ExpertSplit.of(2, 4, False))
    one = next(g for g in rank if g.name == "mlp.experts")
    assert one.rows == spec.moe.expert_intermediate_size // 8 and one.count == 3 * 128


@settings(max_examples=60, deadline=None)
@given(experts=st.integers(1, 400), tp=st.sampled_from([1, 2, 4, 8]), dp=st.integers(1, 16))
def test_expert_parallel_ranks_hold_every_expert_once(experts: int, tp: int, dp: int) -> None:
    """determine_expert_map: E // n each, the first E % n one more; together all E, once."""
    devices = tp * dp
    held = [ExpertSplit(devices, devices > 1, r).local_experts(experts) for r in range(devices)]
    assert sum(held) == experts if devices > 1 else held == [experts]
    assert max(held) == held[0] == -(-experts // devices) if devices > 1 else True
    assert max(held) - min(held) <= 1


def test_the_issue_case_no_longer_plans_every_replica_with_all_experts() -> None:
    """-dp 8 --enable-expert-parallel: a rank holds 16 of Qwen3-30B-A3B's 128 experts whole;
    before, every replica was planned with all of them (all of its weights on every GPU)."""
    spec = load_model("qwen3-30b-a3b").spec
    alone = build_deployment(spec, SERVE).plan.line("weights")
    ep = build_deployment(spec, SERVE, parallel=Parallel(1, 1, 8, True)).plan
    experts = expert_params(inventory(spec))
    assert ep.line("weights") == alone - experts * 2 + experts // 8 * 2  # bf16
    assert any("16 of the 128 routed experts" in note for note in ep.notes)


def test_a_dense_model_says_the_flag_changes_nothing() -> None:
    plan = build_deployment(load_model("llama-3.1-8b").spec, SERVE,
                            parallel=Parallel(1, 1, 4, True)).plan
    assert any("no MoE layers" in note for note in plan.notes)
    assert plan.line("weights") == build_deployment(load_model("llama-3.1-8b").spec,
                                                    SERVE).plan.line("weights")


def test_more_ranks_than_experts_and_uneven_widths_are_refused_by_flag() -> None:
    spec = load_model("mixtral-8x7b-v0.1").spec  # 8 experts of width 14336
    with pytest.raises(SpecError, match="enable-expert-parallel"):
        build_deployment(spec, SERVE, parallel=Parallel(2, 1, 8, True))
    with pytest.raises(SpecError, match="data-parallel-size"):
        build_deployment(spec, SERVE, parallel=Parallel(1, 1, 5))  # 14336 % 5 != 0


def test_a_quantized_checkpoint_keeps_its_experts_under_expert_parallelism() -> None:
    """An fp8 checkpoint's bytes are counted module by module: a rank's experts under
    expert parallelism (24 of 192 matrices a layer) are bytes too, not dropped because the
    rank holds fewer than the model's 256. Whole experts over 8 ranks and each expert's width
    over 8 ranks hold the same values (DeepSeek-V3: 256 experts of 2048 x 7168)."""
    from servecap.ledger.weights import weight_bytes

    spec = load_model("tests/fixtures/configs/deepseek-ai--DeepSeek-V3").spec
    assert spec.quant is not None and spec.quant.method == "fp8"
    ep_split = ExpertSplit.of(8, 1, True)
    ep = weight_bytes(spec, 16, spec.quant, rank_inventory(spec, 8, experts=ep_split))
    width = weight_bytes(spec, 16, spec.quant, rank_inventory(spec, 8))
    whole = weight_bytes(spec, 16, spec.quant)
    assert ep.param_bytes == width.param_bytes
    assert ep.num_parameters == sum(g.numel for g in rank_inventory(spec, 8))
    assert ep.param_bytes > whole.param_bytes // 9  # about an eighth of 671e9 fp8 bytes
