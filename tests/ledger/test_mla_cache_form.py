"""MLA's cache by release: vLLM before 0.7.1 caches DeepSeek's decompressed K and V per head
(tests/fixtures/mla_release/SOURCE.md), from 0.7.1 the 576-wide latent."""

from servecap.ledger.engines import as_cached
from servecap.ledger.kv import Shard, kv_bits_per_token_layer, kv_bytes_per_token
from servecap.ledger.vllm_versions import row
from servecap.model_configs import load_model

BF16 = 16


def test_per_head_bytes_per_token_from_the_config_fields() -> None:
    """v0.7.0's cache_engine: 2 [K,V] x (num_heads / tp) x (qk_nope + qk_rope) x 2 B per layer:
    DeepSeek-V3 (128 heads, 128 + 64) at tp 8: 2 x 16 x 192 x 2 = 12,288 B, x 61 layers
    = 749,568 B per token per rank; at tp 1, 8x that."""
    spec = load_model("deepseek-v3").spec
    att = spec.attention
    old = as_cached(spec, row("0.7.0"))
    assert old.attention.mla_per_head_cache
    for tp in (1, 8):
        shard = Shard(tensor_parallel_size=tp)
        layer = 2 * (att.num_heads // tp) * (att.qk_nope_head_dim + att.qk_rope_head_dim) * 2
        assert kv_bits_per_token_layer(old, BF16, shard) // 8 == layer
        assert kv_bytes_per_token(old, BF16, shard) == spec.num_layers * layer
    assert kv_bytes_per_token(old, BF16, Shard(tensor_parallel_size=8)) == 749_568


def test_the_latent_from_0_7_1_and_without_a_release() -> None:
    """(512 + 64) x 2 B x 61 = 70,272 B per token, whatever the tensor-parallel degree."""
    spec = load_model("deepseek-v3").spec
    for cached in (as_cached(spec, row("0.7.1")), as_cached(spec, row("0.8.0")),
                   as_cached(spec, None)):
        assert not cached.attention.mla_per_head_cache
        assert kv_bytes_per_token(cached, BF16, Shard(tensor_parallel_size=8)) == 70_272


def test_the_rule_touches_mla_models_only() -> None:
    spec = load_model("llama-3.1-8b").spec
    assert as_cached(spec, row("0.6.5")) is spec
    assert [r.pin for r in (row("0.6.3"), row("0.6.4"), row("0.7.0"))] == \
        ["vllm==0.6.3", "vllm==0.6.4", "vllm==0.6.5"]
    assert not any(row(v).mla for v in ("0.6.3", "0.6.4", "0.7.0"))
    assert row("0.7.1").mla and row("0.7.1").pin == "vllm==0.7.1"
