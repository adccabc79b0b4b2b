"""Golden figures for real models, computed from their published config.json values."""

import pytest

from servecap.ledger.arch import count_parameters
from servecap.ledger.kv import kv_bytes_by_layer_kind, kv_bytes_per_token
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model

BF16 = 16

# Parameter counts as published on each model card / safetensors index (bf16 bytes / 2).
PARAMS = {
    "llama-3.1-8b": 8_030_261_248,
    "mistral-7b-v0.1": 7_241_732_096,
    "qwen2.5-7b": 7_615_616_512,
    "llama-3.1-70b-instruct": 70_553_706_496,
}
# metadata.total_size of each model's model.safetensors.index.json (bytes).
TOTAL_SIZE = {
    "llama-3.1-8b": 16_060_522_496,
    "llama-3.1-70b-instruct": 141_107_412_992,
    "mixtral-8x7b-v0.1": 93_405_585_408,
    "qwen3-30b-a3b": 61_064_245_248,
}
KV_PER_TOKEN = {
    "llama-3.1-8b": 131_072,           # 2 x 32 x 8 x 128 x 2
    "llama-3.1-70b-instruct": 327_680,  # 2 x 80 x 8 x 128 x 2
    "mistral-7b-v0.1": 131_072,
    "qwen2.5-7b": 57_344,              # 2 x 28 x 4 x 128 x 2
    "deepseek-v3": 70_272,             # MLA: (512 + 64) x 2 x 61, no factor 2
}


@pytest.mark.parametrize(("name", "expected"), PARAMS.items())
def test_parameter_count_from_architecture(name: str, expected: int) -> None:
    assert count_parameters(load_model(name).spec) == expected


@pytest.mark.parametrize(("name", "expected"), TOTAL_SIZE.items())
def test_bf16_weight_bytes_equal_the_safetensors_total_size(name: str, expected: int) -> None:
    assert weight_bytes(load_model(name).spec, BF16, None).param_bytes == expected


@pytest.mark.parametrize(("name", "expected"), KV_PER_TOKEN.items())
def test_kv_bytes_per_token(name: str, expected: int) -> None:
    assert kv_bytes_per_token(load_model(name).spec, BF16) == expected


def test_gemma2_sliding_layers_hold_at_most_the_window() -> None:
    spec = load_model("gemma-2-9b-it").spec
    split = kv_bytes_by_layer_kind(spec, BF16, 8192, 16)
    per_layer_token = 2 * 8 * 256 * 2
    assert split["full"] == 21 * 8192 * per_layer_token
    assert split["sliding"] == 21 * (4096 + 16) * per_layer_token  # window + 1 block


def test_gpt_oss_alternates_128_token_windows() -> None:
    spec = load_model("gpt-oss-20b").spec
    split = kv_bytes_by_layer_kind(spec, BF16, 1000, 16)
    per_layer_token = 2 * 8 * 64 * 2
    assert split["sliding"] == 12 * (128 + 16) * per_layer_token  # window + 1 block
    assert split["full"] == 12 * 1008 * per_layer_token  # 1000 rounded up to 63 blocks


def test_gpt_oss_mxfp4_metadata_is_one_byte_per_32_expert_weights() -> None:
    spec = load_model("gpt-oss-20b").spec
    result = weight_bytes(spec, BF16, spec.quant)
    experts = 24 * 32 * 3 * 2880 * 2880
    assert result.quantized_parameters == experts
    assert result.metadata_bytes == experts // 32


def test_int4_group_metadata_counts_scales_and_zero_points() -> None:
    from servecap.ledger.weights import default_quant

    spec = load_model("llama-3.1-8b").spec
    result = weight_bytes(spec, BF16, default_quant("int4", 128, True))
    # fp16 scale + 4-bit zero point per 128 weights of every linear layer.
    linear = 32 * (4096 * 4096 * 2 + 1024 * 4096 * 2 + 3 * 14336 * 4096)
    assert result.quantized_parameters == linear
    assert result.metadata_bytes == linear // 128 * 20 // 8


@pytest.mark.parametrize("lengths", [(8192,) * 4, (100, 5000, 300)])
def test_hybrid_kv_in_use_splits_into_full_and_windowed_layers(lengths) -> None:
    """The ledger's KV line is the sum of its two kinds; a shared prefix is stored once in the
    full layers only; windowed layers hold their prefill in flight (W - 1 + T tokens, +1
    block) at most, and their steady decode hold the window (+1 block) at most."""
    from servecap.ledger.plan import build_plan
    from servecap.ledger.serve import ServeSpec

    spec = load_model("gemma-2-9b-it").spec
    serve = ServeSpec(device_bytes=80 * 2**30, context_tokens=max(lengths),
                      concurrency=len(lengths), lengths=lengths, shared_prefix_tokens=64)
    plan = build_plan(spec, serve)
    kinds = plan.kv_in_use_by_kind
    assert sum(kinds.values()) == plan.line("kv_cache")
    peak = kv_bytes_by_layer_kind(spec, BF16, 10**6, 16, max_num_batched_tokens=8192)
    per_window = kv_bytes_by_layer_kind(spec, BF16, 10**6, 16)["sliding"]  # the decode hold
    assert peak["sliding"] == 21 * (4096 + 8192 + 16) * per_window // (21 * (4096 + 16))
    assert 0 < kinds["sliding"] <= peak["sliding"] * len(lengths)
    hold = plan.kv_decode_hold_bytes - kinds["full"]
    assert 0 < hold <= per_window * len(lengths) and hold <= kinds["sliding"]
    unshared = sum(kv_bytes_by_layer_kind(spec, BF16, n, 16)["full"] for n in lengths)
    assert kinds["full"] == unshared - kv_bytes_by_layer_kind(spec, BF16, 64, 16)["full"] * (
        len(lengths) - 1)
