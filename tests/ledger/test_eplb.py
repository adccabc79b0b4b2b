"""Redundant experts and EPLB's state: vLLM's own documented example, its tables per release,
and the refusals vLLM makes."""

import re
from pathlib import Path

import pytest

from servecap.ledger.eplb import EplbSpec, eplb_bytes, expert_bytes, experts_per_rank
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import Shard
from servecap.model_configs import load_model

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "eplb" / "eplb_state_example.txt"
DEEPSEEK = load_model("deepseek-v3").spec  # 256 routed experts, 58 MoE layers, fp8 128 x 128
FP8_BLOCK = DEEPSEEK.quant


def _documented() -> tuple[int, int, int, int]:
    """(logical, redundant, EP ranks, local experts) as vLLM's eplb_state.py states them."""
    text = " ".join(EXAMPLE.read_text().split())
    logical = int(re.search(r"has (\d+) logical experts", text)[1])
    redundant = int(re.search(r"add (\d+) redundant experts", text)[1])
    ranks = int(re.search(r"have (\d+) EP ranks", text)[1])
    local = int(re.search(r"hold \d+ / \d+ = (\d+) local physical experts", text)[1])
    return logical, redundant, ranks, local


def test_vllms_documented_example_experts_per_gpu():
    """DeepSeek-R1, 32 redundant experts over 32 EP ranks: 9 local physical experts a GPU."""
    logical, redundant, ranks, local = _documented()
    assert (logical, redundant, ranks, local) == (256, 32, 32, 9)
    assert DEEPSEEK.moe.num_experts == logical
    assert experts_per_rank(logical, ranks, redundant) == local


def test_the_documented_deployment_holds_one_more_expert_a_layer():
    """Each of the 58 MoE layers holds 9 experts where it held 8: one DeepSeek-V3 expert is
    gate, up and down of 2,048 x 7,168 fp8 values with an fp32 scale per 128 x 128 tile."""
    logical, redundant, ranks, local = _documented()
    one = 3 * (2048 * 7168 + (2048 // 128) * (7168 // 128) * 4)
    assert expert_bytes(DEEPSEEK, 16, FP8_BLOCK) == one == 44_050_944
    found = eplb_bytes(DEEPSEEK, EplbSpec(redundant, ranks), Shard(1), 16, FP8_BLOCK)
    assert found.redundant_bytes == 58 * (local - logical // ranks) * one
    assert found.buffer_bytes == local * one  # v0.12 on: one layer's local experts again
    # int64 physical_to_logical, logical_to_physical (1,024 slots), replica counts; int32
    # load pass and a 1,000-step window, for every MoE layer of the model
    assert found.table_bytes == 58 * (288 + 256 * 1024 + 256) * 8 + 58 * 288 * 4 * 1001


def test_the_tables_and_buffer_follow_the_release():
    old = eplb_bytes(DEEPSEEK, EplbSpec(32, 32, release=(0, 9, 2)), Shard(1), 16, FP8_BLOCK)
    mid = eplb_bytes(DEEPSEEK, EplbSpec(32, 32, release=(0, 11, 0)), Shard(1), 16, FP8_BLOCK)
    assert old.buffer_bytes == mid.buffer_bytes == 0  # moved through a buffer made per move
    assert old.table_bytes == 58 * (288 + 256 * 33 + 256) * 8 + 58 * 288 * 4 * 1001
    assert mid.table_bytes == 58 * (288 + 256 * 1024 + 256) * 8 + 58 * 288 * 4 * 1001


def test_a_pipeline_stage_holds_its_own_layers_redundant_experts():
    stage = Shard(8, tuple(range(30)), True, False)  # layers 0-29: 27 of them MoE
    found = eplb_bytes(DEEPSEEK, EplbSpec(64, 8), stage, 16, FP8_BLOCK)
    assert found.redundant_bytes == 27 * (40 - 32) * expert_bytes(DEEPSEEK, 16, FP8_BLOCK)


@pytest.mark.parametrize(("spec", "eplb", "needle"), [
    (DEEPSEEK, EplbSpec(30, 32), "must divide by the expert-parallel size 32"),
    (load_model("llama-3.1-8b").spec, EplbSpec(0, 2), "has none"),
])
def test_vllms_refusals(spec, eplb, needle):
    with pytest.raises(SpecError, match=needle):
        eplb_bytes(spec, eplb, Shard(1), 16, spec.quant)


def test_one_rank_and_too_many_redundant_experts_are_refused():
    with pytest.raises(SpecError, match="more than one rank"):
        EplbSpec(32, 1)
    with pytest.raises(SpecError, match="at most 1023"):
        EplbSpec(1024, 8)
