"""KV cache bytes: per token, per request and per batch, for GQA, MLA, sliding-window and
chunked-local layers (linear-attention and Mamba layers hold a fixed state: ledger/state.py)."""

from dataclasses import dataclass

from .dtypes import bits_to_bytes
from .errors import SpecError
from .experts import ExpertSplit
from .model import ATTENTION_KINDS, CHUNKED, FULL, SLIDING, ModelSpec
from .paging import blocks_for, windowed_blocks


@dataclass(frozen=True)
class Shard:
    """Which part of the model one device holds: tensor-parallel degree, its pipeline layers,
    whether its stage is the first (embedding) and the last (final norm, lm_head), and how the
    routed experts split (ledger/experts.py: over tp x dp ranks under data parallelism)."""

    tensor_parallel_size: int = 1
    layers: tuple[int, ...] | None = None
    first_stage: bool = True
    last_stage: bool = True
    experts: ExpertSplit | None = None  # routed experts over tp x dp (None: over tp)

    def layer_ids(self, spec: ModelSpec) -> tuple[int, ...]:
        return self.layers if self.layers is not None else tuple(range(spec.num_layers))

    def is_whole(self, spec: ModelSpec) -> bool:
        """One device holds the entire model."""
        return self.tensor_parallel_size == 1 and len(self.layer_ids(spec)) == spec.num_layers \
            and (self.experts is None or self.experts.devices == 1)


WHOLE = Shard()


def kv_heads_per_rank(spec: ModelSpec, tensor_parallel_size: int, kind: str = SLIDING) -> int:
    """ceil(H_kv / tp): when H_kv < tp each KV head is replicated on several ranks."""
    return -(-spec.attention.shape(kind)[0] // tensor_parallel_size)


def kv_bits_for_layer(spec: ModelSpec, layer: int, kv_bits: int, shard: Shard) -> int:
    """One token in one layer, by its kind: 0 for state layers and cache-free layers; full
    layers with their own shape (Gemma-4's 512-wide global heads) use it. A layer with its own
    shape (ModelSpec.layer_shapes) caches ceil(H_kv / tp) x (d_k + d_v) x b_kv (vLLM's
    AttentionSpec with head_size_v, v0.16+), and nothing when it has no attention block or reads
    another layer's K and V (kv_sharing_target_layer_name: GPUModelRunner.get_kv_cache_spec
    skips it, vllm/v1/worker/gpu_model_runner.py at v0.21.0)."""
    kind = spec.layer_kind(layer)
    if kind not in ATTENTION_KINDS:
        return 0
    if spec.attention.kind == "mla":
        return kv_bits_per_token_layer(spec, kv_bits, shard)
    if spec.layer_shapes:
        shape = spec.layer_shapes[layer]
        if not shape.caches_kv:
            return 0
        heads = -(-shape.num_kv_heads // shard.tensor_parallel_size)
        return heads * (shape.head_dim + shape.v_head_dim) * kv_bits
    heads = kv_heads_per_rank(spec, shard.tensor_parallel_size, kind)
    return 2 * heads * spec.attention.shape(kind)[1] * kv_bits


def kv_bits_per_token_layer(spec: ModelSpec, kv_bits: int, shard: Shard = WHOLE) -> int:
    """One token in one layer. GQA: 2 [K,V] x H_kv x d_h x b_kv. MLA (DeepSeek-V2/V3):
    (kv_lora_rank + qk_rope_head_dim) x b_kv, one latent per token, no factor 2, not sharded;
    MLA run as multi-head attention (mla_per_head_cache, vLLM before 0.7.1): the GQA form
    with every head a KV head of qk_nope + qk_rope (V padded to it), sharded by tp."""
    att = spec.attention
    if att.kind == "mla" and not att.mla_per_head_cache:
        return (att.kv_lora_rank + att.qk_rope_head_dim) * kv_bits
    if att.kind == "mla":
        heads = -(-att.num_heads // shard.tensor_parallel_size)
        return 2 * heads * (att.qk_nope_head_dim + att.qk_rope_head_dim) * kv_bits
    heads = kv_heads_per_rank(spec, shard.tensor_parallel_size)
    return 2 * heads * att.head_dim * kv_bits


def kv_bytes_per_token(spec: ModelSpec, kv_bits: int, shard: Shard = WHOLE) -> int:
    """2 x L x H_kv x d_h x b_kv bytes/token (seed 000), over every layer this shard holds.
    Llama-3.1-8B in bf16: 2 x 32 x 8 x 128 x 2 = 131,072 B."""
    _check_attention(spec)
    if not spec.is_hybrid:
        layers = len(shard.layer_ids(spec))
        return bits_to_bytes(layers * kv_bits_per_token_layer(spec, kv_bits, shard))
    return bits_to_bytes(sum(kv_bits_for_layer(spec, n, kv_bits, shard)
                             for n in shard.layer_ids(spec)))


def indexer_bytes_per_token(spec: ModelSpec, shard: Shard = WHOLE) -> int:
    """DeepSeek-V3.2 / GLM-5's indexer K cache: 132 B per token per MLA layer (fp8 + scales,
    cache_specs.IndexerPage), not sharded by tensor parallelism, whatever the KV dtype."""
    dim = spec.attention.indexer_head_dim
    if not dim:
        return 0
    from .cache_specs import indexer_bytes_per_token as per_layer  # indexer models alone

    return len(shard.layer_ids(spec)) * per_layer(dim)


def kv_bytes_by_layer_kind(spec: ModelSpec, kv_bits: int, tokens: int, block_size_tokens: int,
                           shard: Shard = WHOLE, max_num_batched_tokens: int | None = None,
                           prompt_tokens: int | None = None) -> dict[str, int]:
    """Bytes one sequence of `tokens` holds, split into full and sliding-window layers. A full
    layer holds ceil(S/B) x B slots; a windowed layer, without a token budget, its steady
    decode hold min(ceil(S/B), 1 + ceil((W-1)/B)) x B (paging.window_blocks: the window need
    not start on a block edge), and with max_num_batched_tokens T its peak, the in-flight
    prefill of its prompt (paging.windowed_blocks: vLLM's SlidingWindowSpec); a chunked-local
    layer ceil(min(S, C) / B) x B, the most it holds at once (its chunk fills before it is
    freed)."""
    _check_attention(spec)
    window = spec.attention.sliding_window_tokens
    chunk = spec.attention.chunk_size_tokens
    out = {FULL: 0, SLIDING: 0}
    for layer in shard.layer_ids(spec):
        kind = spec.layer_kind(layer)
        per_layer = kv_bits_for_layer(spec, layer, kv_bits, shard)
        if not per_layer:
            continue
        if kind == SLIDING and window:
            blocks = windowed_blocks(tokens, window, block_size_tokens,
                                     max_num_batched_tokens, prompt_tokens)
        elif kind == CHUNKED and chunk:
            blocks = blocks_for(min(tokens, chunk), block_size_tokens)
        else:
            blocks = blocks_for(tokens, block_size_tokens)
        key = kind if kind in (SLIDING, CHUNKED) else FULL
        out[key] = out.get(key, 0) + blocks * block_size_tokens * per_layer
    return {kind: bits_to_bytes(bits) for kind, bits in out.items()}


def kv_bytes_per_request(spec: ModelSpec, kv_bits: int, tokens: int, block_size_tokens: int,
                         shard: Shard = WHOLE, max_num_batched_tokens: int | None = None) -> int:
    """M_KV,request = Σ over layers of the slots it holds x bytes per slot (windowed layers at
    their peak when a token budget is given, see kv_bytes_by_layer_kind)."""
    return sum(kv_bytes_by_layer_kind(spec, kv_bits, tokens, block_size_tokens, shard,
                                      max_num_batched_tokens).values())


def kv_in_use_for_load(spec: ModelSpec, kv_bits: int, requests: list[tuple[int, int]],
                       block_size_tokens: int, max_num_batched_tokens: int,
                       shard: Shard = WHOLE) -> int:
    """Σ over (prompt tokens, total tokens) requests of the KV each holds at its peak: the
    kv_cache line for a load whose prompts are known (windowed layers at the larger of their
    decode hold and their own prompt's in-flight prefill; other layers as the line)."""
    return sum(sum(kv_bytes_by_layer_kind(spec, kv_bits, total, block_size_tokens, shard,
                                          max_num_batched_tokens, prompt).values())
               for prompt, total in requests)


def _check_attention(spec: ModelSpec) -> None:
    att = spec.attention
    if att.kind == "mla":
        if att.kv_lora_rank <= 0:
            raise SpecError("kv_lora_rank", att.kv_lora_rank, "MLA needs kv_lora_rank > 0")
        return
    if att.num_kv_heads <= 0 or att.head_dim <= 0:
        raise SpecError("num_key_value_heads/head_dim", (att.num_kv_heads, att.head_dim),
                        "both must be >= 1 to size the KV cache")
