"""KV cache bytes: per token, per request and per batch, for GQA, MLA and sliding-window layers."""

from dataclasses import dataclass

from .dtypes import bits_to_bytes
from .errors import SpecError
from .model import SLIDING, ModelSpec
from .paging import blocks_for, window_blocks


@dataclass(frozen=True)
class Shard:
    """Which part of the model one device holds: tensor-parallel degree, its pipeline layers,
    and whether its stage is the first (embedding) and the last (final norm, lm_head)."""

    tensor_parallel_size: int = 1
    layers: tuple[int, ...] | None = None
    first_stage: bool = True
    last_stage: bool = True

    def layer_ids(self, spec: ModelSpec) -> tuple[int, ...]:
        return self.layers if self.layers is not None else tuple(range(spec.num_layers))

    def is_whole(self, spec: ModelSpec) -> bool:
        """One device holds the entire model."""
        return self.tensor_parallel_size == 1 and len(self.layer_ids(spec)) == spec.num_layers


WHOLE = Shard()


def kv_heads_per_rank(spec: ModelSpec, tensor_parallel_size: int) -> int:
    """ceil(H_kv / tp): when H_kv < tp each KV head is replicated on several ranks."""
    return -(-spec.attention.num_kv_heads // tensor_parallel_size)


def kv_bits_per_token_layer(spec: ModelSpec, kv_bits: int, shard: Shard = WHOLE) -> int:
    """One token in one layer. GQA: 2 [K,V] x H_kv x d_h x b_kv. MLA (DeepSeek-V2/V3):
    (kv_lora_rank + qk_rope_head_dim) x b_kv, one latent per token, no factor 2, not sharded."""
    att = spec.attention
    if att.kind == "mla":
        return (att.kv_lora_rank + att.qk_rope_head_dim) * kv_bits
    heads = kv_heads_per_rank(spec, shard.tensor_parallel_size)
    return 2 * heads * att.head_dim * kv_bits


def kv_bytes_per_token(spec: ModelSpec, kv_bits: int, shard: Shard = WHOLE) -> int:
    """2 x L x H_kv x d_h x b_kv bytes/token (seed 000), over every layer this shard holds.
    Llama-3.1-8B in bf16: 2 x 32 x 8 x 128 x 2 = 131,072 B."""
    _check_attention(spec)
    layers = len(shard.layer_ids(spec))
    return bits_to_bytes(layers * kv_bits_per_token_layer(spec, kv_bits, shard))


def kv_bytes_by_layer_kind(spec: ModelSpec, kv_bits: int, tokens: int, block_size_tokens: int,
                           shard: Shard = WHOLE) -> dict[str, int]:
    """Bytes one sequence of `tokens` holds, split into full and sliding-window layers. A full
    layer holds ceil(S/B) x B slots; a windowed layer min(ceil(S/B), 1 + ceil((W-1)/B)) x B
    (paging.window_blocks: the window need not start on a block edge)."""
    _check_attention(spec)
    per_layer = kv_bits_per_token_layer(spec, kv_bits, shard)
    window = spec.attention.sliding_window_tokens
    out = {"full": 0, "sliding": 0}
    for layer in shard.layer_ids(spec):
        kind = spec.layer_kind(layer)
        blocks = (window_blocks(tokens, window, block_size_tokens) if kind == SLIDING and window
                  else blocks_for(tokens, block_size_tokens))
        slots = blocks * block_size_tokens
        out["sliding" if kind == SLIDING else "full"] += slots * per_layer
    return {kind: bits_to_bytes(bits) for kind, bits in out.items()}


def kv_bytes_per_request(spec: ModelSpec, kv_bits: int, tokens: int, block_size_tokens: int,
                         shard: Shard = WHOLE) -> int:
    """M_KV,request = Σ over layers of the slots it holds x bytes per slot."""
    return sum(kv_bytes_by_layer_kind(spec, kv_bits, tokens, block_size_tokens, shard).values())


def _check_attention(spec: ModelSpec) -> None:
    att = spec.attention
    if att.kind == "mla":
        if att.kv_lora_rank <= 0:
            raise SpecError("kv_lora_rank", att.kv_lora_rank, "MLA needs kv_lora_rank > 0")
        return
    if att.num_kv_heads <= 0 or att.head_dim <= 0:
        raise SpecError("num_key_value_heads/head_dim", (att.num_kv_heads, att.head_dim),
                        "both must be >= 1 to size the KV cache")
