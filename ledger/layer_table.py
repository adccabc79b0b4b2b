"""Each layer's geometry as the ledger reads it: its kind, attention heads, K and V head sizes,
the bytes one token takes in its KV cache, the layer whose K and V it reads, its fixed state
and its feed-forward width: what plan --json lists under "layers"."""

from dataclasses import asdict, dataclass

from .dtypes import bits_to_bytes
from .kv import Shard, kv_bits_for_layer
from .model import ATTENTION_KINDS, ModelSpec
from .state import state_bytes_per_layer


@dataclass(frozen=True)
class LayerRow:
    layer: int
    kind: str
    attention_heads: int
    kv_heads: int
    k_head_dim: int
    v_head_dim: int
    kv_bytes_per_token: int
    kv_source: int | None
    state_bytes: int
    ffn: str  # "dense WIDTH", "moe", or "none"


def layer_rows(spec: ModelSpec, kv_bits: int, tp: int = 1) -> list[LayerRow]:
    """One row per layer, on one rank of `tp` (KV heads ceil(H_kv / tp))."""
    if not spec.has_architecture:
        return []
    shard = Shard(tensor_parallel_size=tp)
    state = state_bytes_per_layer(spec.state, tp) if spec.state_layers else 0
    held = set(spec.state_layers)
    return [_row(spec, n, kv_bits, shard, state if n in held else 0)
            for n in range(spec.num_layers)]


def _row(spec: ModelSpec, n: int, kv_bits: int, shard: Shard, state: int) -> LayerRow:
    kind, shape = spec.layer_kind(n), spec.shape_at(n)
    attends = kind in ATTENTION_KINDS and shape.attention
    mla = spec.attention.kind == "mla"
    att = spec.attention
    k_dim = att.kv_lora_rank + att.qk_rope_head_dim if mla else shape.head_dim
    return LayerRow(
        n, kind, shape.num_heads if attends else 0, (1 if mla else shape.num_kv_heads)
        if attends else 0, k_dim if attends else 0,
        (0 if mla else shape.v_head_dim) if attends else 0,
        bits_to_bytes(kv_bits_for_layer(spec, n, kv_bits, shard)), shape.kv_source, state,
        _ffn(spec, n))


def _ffn(spec: ModelSpec, n: int) -> str:
    if spec.mlp_layers is not None and n not in spec.mlp_layers:
        return "none"
    if spec.moe is not None and n not in spec.moe.dense_layers:
        return "moe"
    width = spec.layer_shapes[n].intermediate if spec.layer_shapes else spec.intermediate_size
    return f"dense {width}" if width else "none"


def as_dicts(rows: list[LayerRow]) -> list[dict]:
    return [asdict(row) for row in rows]
