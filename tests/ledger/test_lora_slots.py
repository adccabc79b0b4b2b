"""LoRA adapter slots: vLLM's create_lora_weights shapes, per rank, per release."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.errors import SpecError
from servecap.ledger.kv import Shard
from servecap.ledger.lora import LoraSpec, edge_slices, layer_slices, lora_bytes
from servecap.model_configs import load_model

LLAMA = load_model("llama-3.1-8b").spec
QWEN2 = load_model("qwen2.5-7b").spec


def _elements(slices):
    return sum(s.elements for s in slices)


def test_llama_8b_slots_are_vllm_stacked_a_and_b_per_slice():
    """Llama-3.1-8B at rank 64, one rank: the shapes of vLLM v0.33.0's MergedQKV, Row and
    MergedColumn wrappers, written out from vllm/lora/layers/*.py create_lora_weights: q/k/v
    A 64 x 4096 each, B 4096 / 1024 / 1024 x 64; o A 64 x 4096, B 4096 x 64; gate/up A
    64 x 4096, B 14336 x 64; down A 64 x 14336, B 4096 x 64."""
    lora = LoraSpec(max_loras=4, max_lora_rank=64)
    per_layer = 3 * 64 * 4096 + (4096 + 1024 + 1024) * 64 + 2 * 64 * 4096 \
        + 2 * 64 * 4096 + 2 * 14336 * 64 + 64 * 14336 + 4096 * 64
    assert _elements(layer_slices(LLAMA, lora, 1)) == per_layer == 5_242_880
    # the embedding's A (vocab x rank) and B (hidden x rank); lm_head's A (rank x hidden), B
    # (vocab x rank): whole on every rank
    edges = 2 * (128_256 * 64 + 4096 * 64)
    assert _elements(edge_slices(LLAMA, lora, True, True)) == edges
    found = lora_bytes(LLAMA, lora, Shard(1), 16)
    assert found.device_bytes == 4 * (32 * per_layer + edges) * 2 == 1_477_705_728
    assert found.host_bytes == found.device_bytes  # max_cpu_loras defaults to max_loras


def test_tensor_parallel_splits_b_of_column_and_a_of_row_layers():
    lora = LoraSpec(max_loras=1, max_lora_rank=16)
    one, two = (_elements(layer_slices(LLAMA, lora, tp)) for tp in (1, 2))
    # q/k/v/gate/up B halve, o/down A halve; every A of a column layer stays whole
    halved = (4096 + 1024 + 1024 + 2 * 14336) * 16 + (4096 + 14336) * 16
    assert one - two == halved // 2
    host = lora_bytes(LLAMA, lora, Shard(2), 16).host_bytes
    assert host == lora_bytes(LLAMA, lora, Shard(1), 16).host_bytes  # each rank a whole copy


def test_fully_sharded_loras_cut_the_rank_and_the_row_layers_output():
    plain = _elements(layer_slices(LLAMA, LoraSpec(max_lora_rank=64), 4))
    sharded = _elements(layer_slices(LLAMA, LoraSpec(max_lora_rank=64, fully_sharded=True), 4))
    # column A: 64 -> 16 rows on q, k, v, gate, up; row B: 4096 -> 1024 rows on o, down
    assert plain - sharded == 5 * (64 - 16) * 4096 + 2 * (4096 - 1024) * 64
    with pytest.raises(SpecError, match="divisible"):
        layer_slices(LLAMA, LoraSpec(max_lora_rank=8, fully_sharded=True), 16)


def test_before_0_12_the_extra_vocabulary_adds_rows_and_slot_embeddings():
    """v0.11: lora_extra_vocab_size 256: embedding A over 128,256 + 256 rows, lm_head B
    padded to 256 (128,512), each slot's 256 x hidden embeddings in both, 4 x 256 base
    embedding rows and 256 lm_head rows."""
    old = lora_bytes(LLAMA, LoraSpec(4, 64, release=(0, 11, 0)), Shard(1), 16)
    new = lora_bytes(LLAMA, LoraSpec(4, 64), Shard(1), 16)
    assert old.slot_bytes - new.slot_bytes == 4 * 2 * (256 * 64 + 256 * 64)
    assert old.extra_vocab_bytes == (4 * 256 * 4096 * 2 + 1024 * 4096 + 256 * 4096) * 2


def test_families_follow_the_release():
    """Qwen2 lists no embedding modules; Qwen3 does from v0.16; Phi-3 packs one slice each."""
    assert edge_slices(QWEN2, LoraSpec(), True, True) == ()
    qwen3 = load_model("qwen3-14b").spec
    assert edge_slices(qwen3, LoraSpec(release=(0, 15, 1)), True, True) == ()
    assert [s.module for s in edge_slices(qwen3, LoraSpec(), True, True)] == \
        ["embed_tokens", "lm_head"]
    phi3 = load_model("phi-3-mini-4k-instruct").spec
    assert [s.module for s in layer_slices(phi3, LoraSpec(), 1)] == \
        ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]


def test_target_modules_keep_packed_modules_whole():
    """--lora-target-modules q_proj wraps the whole qkv_proj (vLLM's is_in_target_modules)."""
    kept = layer_slices(LLAMA, LoraSpec(target_modules=("q_proj",)), 1)
    assert [s.module for s in kept] == ["q_proj", "k_proj", "v_proj"]
    assert edge_slices(LLAMA, LoraSpec(target_modules=("o_proj",)), True, True) == ()


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"max_lora_rank": 48}, "one of 1, 8, 16"),
    ({"max_lora_rank": 1, "release": (0, 10, 2)}, "one of 8, 16"),
    ({"max_lora_rank": 320, "release": (0, 7, 3)}, "one of 8, 16, 32, 64, 128, 256 "),
    ({"max_loras": 4, "max_cpu_loras": 2}, "at least --max-loras"),
    ({"target_modules": ("o_proj",), "release": (0, 18, 1)}, "exists from vLLM v0.19.0"),
    ({"target_modules": ("attn",)}, "module names among"),
    ({"dtype": "int4"}, "--lora-dtype"),
])
def test_bad_knobs_name_the_flag(kwargs, needle):
    with pytest.raises(SpecError, match=needle):
        LoraSpec(**kwargs)


def test_unmodelled_families_fail_closed():
    for name in ("qwen3-30b-a3b", "deepseek-v3", "nemotron-3-nano-30b-a3b"):
        with pytest.raises(SpecError, match="LoRA slots are modelled for the dense"):
            lora_bytes(load_model(name).spec, LoraSpec(), Shard(1), 16)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16), st.sampled_from((8, 16, 32, 64, 128)), st.sampled_from((1, 2, 4, 8)))
def test_slots_are_linear_in_max_loras_and_grow_with_rank(loras, rank, tp):
    one = lora_bytes(LLAMA, LoraSpec(1, rank), Shard(tp), 16).device_bytes
    assert lora_bytes(LLAMA, LoraSpec(loras, rank), Shard(tp), 16).device_bytes == loras * one
    assert lora_bytes(LLAMA, LoraSpec(1, rank * 2), Shard(tp), 16).device_bytes == 2 * one
