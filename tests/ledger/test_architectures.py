"""Golden numbers from real configs: KV bytes per token (GQA, MLA, sliding windows), parameter
counts, safetensors totals, quantization metadata, MoE inventories."""

import pytest

from servecap.ledger.arch import active_parameters, count_parameters
from servecap.ledger.kv import kv_bytes_by_layer_kind, kv_bytes_per_token
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model
from servecap.model_configs.quant import parse_quantization


def spec(name):
    return load_model(name).spec


@pytest.mark.parametrize(("name", "per_token"), [
    ("llama-3.1-8b", 131_072),            # 2 x 32 layers x 8 heads x 128 x 2 B
    ("llama-3.1-70b-instruct", 327_680),  # 2 x 80 x 8 x 128 x 2
    ("mistral-7b-v0.1", 131_072),
    ("qwen2.5-7b", 57_344),               # 2 x 28 x 4 x 128 x 2
    ("qwen3-30b-a3b", 98_304),            # 2 x 48 x 4 x 128 x 2
    ("gemma-2-9b-it", 344_064),           # 2 x 42 x 8 x 256 x 2
    ("gpt-oss-20b", 49_152),              # 2 x 24 x 8 x 64 x 2
    ("deepseek-v3", 70_272),              # MLA: 61 x (512 + 64) x 2, no factor 2, no heads
])
def test_kv_bytes_per_token_bf16(name, per_token):
    assert kv_bytes_per_token(spec(name), 16) == per_token


def test_mla_latent_ignores_heads_and_is_one_vector():
    ds = spec("deepseek-v3")
    assert ds.attention.num_kv_heads == 128
    assert kv_bytes_per_token(ds, 8) == 61 * (512 + 64)  # fp8 KV: one byte per element


def test_gemma2_sliding_and_full_layers_are_separate():
    """21 full layers hold the whole 8,192; 21 sliding layers the 4,096-token window plus one
    16-token block, as a window that does not start on a block edge straddles 257 blocks."""
    kinds = kv_bytes_by_layer_kind(spec("gemma-2-9b-it"), 16, 8192, 16)
    per_layer_token = 2 * 8 * 256 * 2
    assert kinds == {"full": 21 * 8192 * per_layer_token,
                     "sliding": 21 * (4096 + 16) * per_layer_token}


def test_gpt_oss_windowed_layers_hold_the_window_plus_one_block():
    kinds = kv_bytes_by_layer_kind(spec("gpt-oss-20b"), 16, 131_072, 16)
    per_layer_token = 2 * 8 * 64 * 2
    assert kinds == {"full": 12 * 131_072 * per_layer_token,
                     "sliding": 12 * (128 + 16) * per_layer_token}


@pytest.mark.parametrize(("name", "params"), [
    ("llama-3.1-8b", 8_030_261_248),
    ("mistral-7b-v0.1", 7_241_732_096),
    ("qwen2.5-7b", 7_615_616_512),
])
def test_parameter_counts_from_the_architecture(name, params):
    assert count_parameters(spec(name)) == params


@pytest.mark.parametrize(("name", "total_size"), [
    ("llama-3.1-8b", 16_060_522_496),
    ("llama-3.1-70b-instruct", 141_107_412_992),
    ("mixtral-8x7b-v0.1", 93_405_585_408),
    ("qwen3-30b-a3b", 61_064_245_248),
])
def test_bf16_weights_equal_safetensors_total_size(name, total_size):
    """model.safetensors.index.json metadata.total_size of the published checkpoints."""
    result = weight_bytes(spec(name), 16, None)
    assert result.param_bytes + result.metadata_bytes == total_size


def test_moe_every_expert_resident_only_routed_ones_active():
    mixtral = spec("mixtral-8x7b-v0.1")
    assert count_parameters(mixtral) == 46_702_792_704
    idle = (8 - 2) * 3 * 14_336 * 4096 * 32
    assert active_parameters(mixtral) == 46_702_792_704 - idle


def test_deepseek_dense_layers_and_shared_expert():
    ds = spec("deepseek-v3")
    assert ds.moe.dense_layers == (0, 1, 2)
    assert ds.moe.num_shared_experts == 1
    assert count_parameters(ds) == 671_026_419_200  # 671B without the MTP layer


def test_gpt_oss_mxfp4_quantizes_only_the_experts():
    """modules_to_not_convert globs attention, router, embeddings, lm_head: only the 2,304
    expert matrices (3 x 32 x 24) are 4-bit, with one 8-bit scale per 32 elements."""
    gpt = spec("gpt-oss-20b")
    result = weight_bytes(gpt, 16, gpt.quant)
    quantized = 3 * 32 * 24 * 2880 * 2880
    assert result.quantized_parameters == quantized
    assert result.metadata_bytes == 3 * 32 * 24 * 2880 * (2880 // 32)
    dense = 20_914_757_184 - quantized
    assert result.param_bytes == quantized // 2 + dense * 2
    assert result.param_bytes + result.metadata_bytes == 13_761_264_768  # ~13.8 GB checkpoint


def test_awq_int4_group_scales_and_zero_points():
    """AWQ int4, group 128: a 16-bit scale and a 4-bit zero per 128 weights of every linear."""
    llama = spec("llama-3.1-8b")
    awq = parse_quantization({"quant_method": "awq", "bits": 4, "group_size": 128,
                              "zero_point": True})
    result = weight_bytes(llama, 16, awq)
    linear = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14_336 * 4096)
    assert result.quantized_parameters == linear
    assert result.metadata_bytes == linear // 128 * 20 // 8
    assert result.param_bytes == linear // 2 + (8_030_261_248 - linear) * 2


def test_fp8_block_scales_one_fp32_per_128x128_tile():
    ds = spec("deepseek-v3")
    assert ds.quant.granularity == "block" and ds.quant.block_shape == (128, 128)
    result = weight_bytes(ds, 16, ds.quant)
    tiles = result.quantized_parameters * 4 / (128 * 128)  # fp32 per tile, tiles rounded up
    assert tiles <= result.metadata_bytes < tiles * 1.02


def test_nvfp4_scale_per_16_and_a_tensor_scale():
    llama = spec("llama-3.1-8b")
    nvfp4 = parse_quantization({"quant_method": "modelopt", "quant_algo": "NVFP4",
                                "group_size": 16, "exclude_modules": ["lm_head"]})
    result = weight_bytes(llama, 16, nvfp4)
    linear = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14_336 * 4096)
    matrices = 32 * 7  # each: an fp32 weight_scale_2 and (W4A4) an fp32 input_scale
    assert result.metadata_bytes == linear // 16 + matrices * 8


def test_unknown_quant_method_fails_closed():
    from servecap.ledger.errors import SpecError
    with pytest.raises(SpecError, match="quant_method"):
        parse_quantization({"quant_method": "bitnet"})


def test_gptq_adds_g_idx_per_input_column():
    """GPTQ: 16-bit scales and 4-bit packed zeros per group (stored even when symmetric), plus
    one int32 g_idx per input column of each of the 7 matrices of each of the 32 layers."""
    llama = spec("llama-3.1-8b")
    gptq = parse_quantization({"quant_method": "gptq", "bits": 4, "group_size": 128,
                               "sym": True, "desc_act": False})
    result = weight_bytes(llama, 16, gptq)
    linear = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14_336 * 4096)
    g_idx = 32 * (6 * 4096 + 14_336) * 4
    assert result.metadata_bytes == linear // 128 * 20 // 8 + g_idx


LINEAR_8B = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14_336 * 4096)


def compressed(weights, ignore=("lm_head",)):
    return parse_quantization({"quant_method": "compressed-tensors", "ignore": list(ignore),
                               "config_groups": {"group_0": {"targets": ["Linear"],
                                                             "weights": weights}}})


def test_compressed_tensors_fp8_per_channel():
    quant = compressed({"num_bits": 8, "type": "float", "strategy": "channel",
                        "symmetric": True})
    result = weight_bytes(spec("llama-3.1-8b"), 16, quant)
    rows = 32 * (4096 + 1024 + 1024 + 4096 + 2 * 14_336 + 4096)  # output channels per layer
    assert result.metadata_bytes == rows * 4
    assert result.param_bytes == LINEAR_8B + (8_030_261_248 - LINEAR_8B) * 2


def test_compressed_tensors_w4a16_groups_without_zero_points():
    quant = compressed({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                        "symmetric": True})
    assert (quant.bits, quant.group_size, quant.zero_point) == (4, 128, False)
    result = weight_bytes(spec("llama-3.1-8b"), 16, quant)
    # a bf16 scale per 128 and compressed-tensors' int64 (2,) weight_shape per matrix
    assert result.metadata_bytes == LINEAR_8B // 128 * 2 + 32 * 7 * 16


def test_compressed_tensors_nvfp4_and_unknown_schemes():
    quant = compressed({"num_bits": 4, "type": "float", "strategy": "tensor_group",
                        "group_size": 16})
    assert (quant.method, quant.group_size, quant.per_tensor_scale) == ("nvfp4", 16, True)
    from servecap.ledger.errors import SpecError
    with pytest.raises(SpecError, match="config_groups.group_0.weights"):
        compressed({"num_bits": 2, "type": "int", "strategy": "group"})


def test_gptq_per_channel_group_size_minus_one():
    quant = parse_quantization({"quant_method": "gptq", "bits": 8, "group_size": -1})
    result = weight_bytes(spec("llama-3.1-8b"), 16, quant)
    rows = 32 * (4096 + 1024 + 1024 + 4096 + 2 * 14_336 + 4096)
    g_idx = 32 * (6 * 4096 + 14_336) * 4
    assert result.metadata_bytes == rows * (16 + 8) // 8 + g_idx


def test_window_blocks_is_the_most_a_freeing_paged_engine_holds():
    """Brute force: a decode step writing position p holds the blocks of [p - W + 1, p] (every
    earlier block freed); the most over the first S tokens is paging.window_blocks(S, W, B)."""
    from servecap.ledger.paging import window_blocks
    for bsz in (1, 3, 4, 16):
        for window in range(1, 40):
            most = 0
            for tokens in range(1, 80):
                p = tokens - 1
                most = max(most, p // bsz - max(0, p - window + 1) // bsz + 1)
                assert window_blocks(tokens, window, bsz) == most, (bsz, window, tokens)


def test_prefill_window_blocks_bounds_every_chunked_prefill():
    """A prompt of P tokens prefilled in chunks of at most T, each chunk's blocks allocated
    before it runs and those wholly before its window freed: whatever the first chunk, the most
    blocks held at once never exceeds paging.prefill_window_blocks (vLLM's bound)."""
    from servecap.ledger.paging import prefill_window_blocks

    def held(start: int, size: int, window: int, bsz: int) -> int:
        return (start + size - 1) // bsz - max(0, start - window + 1) // bsz + 1

    for bsz in (1, 4, 16):
        for window in (1, 3, 16, 20):
            for budget in (1, 5, 16, 40):
                for prompt in range(1, 90, 7):
                    bound = prefill_window_blocks(prompt, window, bsz, budget)
                    for first in range(1, min(budget, prompt) + 1):  # any first chunk, then T
                        most, start, size = 0, 0, first
                        while start < prompt:
                            size = min(size, prompt - start)
                            most = max(most, held(start, size, window, bsz))
                            start, size = start + size, budget
                        assert most <= bound, (bsz, window, budget, prompt, first)
