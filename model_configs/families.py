"""Per-layer geometry of the families whose vLLM model class builds each layer from its own config
entry, read the way that class reads it (vllm/model_executor/models/ at v0.21.0):
nemotron_nas.py DeciLMDecoderLayer (block_configs), gemma4.py Gemma4Attention (KV sharing,
per-layer embeddings, double-wide MLPs), mimo_v2.py MiMoV2DecoderLayer (hybrid_layer_pattern,
SWA shapes), laguna.py LagunaAttention (per-layer heads); and phi.py PhiForCausalLM, whose
biases, LayerNorms and ungated MLP every layer shares (model_configs/phi.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from servecap.ledger.errors import SpecError
from servecap.ledger.model import FULL, NONE, LayerShape, ModelSpec, PerLayerInput

from .phi import phi_block

if TYPE_CHECKING:  # a bundled YAML is read without the pydantic models (bundled.py)
    from .schema import HFConfig

DECI_MULTIPLE = 256  # DeciLM's _find_multiple(int(2 x ffn_mult x hidden / 3), 256)


def refine(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """The spec with its per-layer shapes, for the families that have them."""
    reader = READERS.get(spec.model_type)
    return reader(cfg, spec) if reader else spec


def _uniform(spec: ModelSpec, layer: int, **changes) -> LayerShape:
    shape = spec.shape_at(layer)
    return replace(shape, **changes)


def deci_blocks(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """DeciLM / Llama-Nemotron NAS: each block_configs entry gives its layer's attention
    (no_op, or num_attention_heads / n_heads_in_group KV heads) and FFN (no_op, or ffn_mult:
    intermediate = the multiple of 256 at or above int(2 x ffn_mult x hidden / 3))."""
    blocks = cfg.block_configs
    if not isinstance(blocks, list) or len(blocks) != spec.num_layers:
        raise SpecError("block_configs", None if blocks is None else f"{len(blocks)} entries",
                        f"one entry per layer ({spec.num_layers})")
    shapes = tuple(_deci_layer(cfg, spec, n, block) for n, block in enumerate(blocks))
    kinds = tuple(FULL if s.attention else NONE for s in shapes)
    kv = [s.num_kv_heads for s in shapes if s.attention] or [spec.attention.num_kv_heads]
    att = replace(spec.attention, layer_kinds=kinds, num_kv_heads=max(set(kv), key=kv.count))
    note = (f"DeciLM blocks (block_configs): {kinds.count(NONE)} of {len(kinds)} have no "
            f"attention and cache nothing, {sum(not s.intermediate for s in shapes)} no "
            f"feed-forward; {len(set(s.intermediate for s in shapes if s.intermediate))} "
            "feed-forward widths")
    return replace(spec, attention=att, layer_shapes=shapes, intermediate_size=max(
        s.intermediate for s in shapes), notes=spec.notes + (note,))


def _deci_layer(cfg: HFConfig, spec: ModelSpec, n: int, block: object) -> LayerShape:
    where = f"block_configs[{n}]"
    attn, ffn = _part(block, "attention", where), _part(block, "ffn", where)
    for part, name in ((attn, "attention"), (ffn, "ffn")):
        if part.get("replace_with_linear"):
            raise SpecError(f"{where}.{name}.replace_with_linear", True, "vLLM's "
                            "DeciLMForCausalLM builds no linear replacement block; only false")
    heads = spec.attention.num_heads
    kv = 0
    if not attn.get("no_op"):
        group = _whole(attn.get("n_heads_in_group"), f"{where}.attention.n_heads_in_group")
        if heads % group:
            raise SpecError(f"{where}.attention.n_heads_in_group", group,
                            f"a divisor of num_attention_heads {heads}")
        kv = heads // group
    width = 0 if ffn.get("no_op") else _deci_width(ffn, cfg.hidden_size, where)
    dim = spec.attention.head_dim
    return LayerShape(heads, kv, dim, dim, width, attention=not attn.get("no_op"))


def _deci_width(ffn: dict, hidden: int, where: str) -> int:
    if ffn.get("ffn_mult") is not None:
        mult = ffn["ffn_mult"]
        if not isinstance(mult, (int, float)) or isinstance(mult, bool) or mult <= 0:
            raise SpecError(f"{where}.ffn.ffn_mult", mult, "a number > 0")
        width = int(2 * mult * hidden / 3)
        return -(-width // DECI_MULTIPLE) * DECI_MULTIPLE
    return _whole(ffn.get("intermediate_size"), f"{where}.ffn.intermediate_size")


def _part(block: object, name: str, where: str) -> dict:
    part = block.get(name) if isinstance(block, dict) else None
    if not isinstance(part, dict):
        raise SpecError(f"{where}.{name}", part, "an object (no_op, n_heads_in_group / ffn_mult)")
    return part


def _whole(value: object, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecError(field, value, "a whole number >= 1")
    return value


def gemma_sharing(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """Gemma-4 (and 3n): the last num_kv_shared_layers layers read the K and V of the last
    earlier layer of their own type and cache none; with use_double_wide_mlp their MLP is twice
    as wide; hidden_size_per_layer_input > 0 adds the per-layer embeddings."""
    shared = cfg.num_kv_shared_layers or 0
    ple = cfg.hidden_size_per_layer_input or 0
    if not shared and not ple:
        return spec
    first = spec.num_layers - shared
    if shared and first < 1:
        raise SpecError("num_kv_shared_layers", shared, f"fewer than the {spec.num_layers} "
                        "layers (the first layer must compute its own K and V)")
    kinds = [spec.layer_kind(n) for n in range(spec.num_layers)]
    shapes = []
    for n, kind in enumerate(kinds):
        source, width = None, spec.intermediate_size
        if shared and n >= first:
            earlier = [i for i in range(first) if kinds[i] == kind]
            if not earlier:
                raise SpecError("num_kv_shared_layers", shared, f"layer {n} ({kind}) has no "
                                f"earlier {kind} layer to share K and V with")
            source = earlier[-1]
            width *= 2 if cfg.use_double_wide_mlp else 1
        shapes.append(_uniform(spec, n, kv_source=source, intermediate=width))
    table = PerLayerInput(cfg.vocab_size_per_layer_input or spec.vocab_size, ple) if ple else None
    notes = (f"{shared} of {spec.num_layers} layers read the K and V of the last earlier layer "
             "of their type (num_kv_shared_layers) and cache nothing",) if shared else ()
    notes += _unused_kv_note(spec, shapes)
    if table is not None:
        notes += (f"per-layer embeddings: {table.vocab_size:,} x {spec.num_layers} x {ple} "
                  "(hidden_size_per_layer_input), counted in the weights",)
    return replace(spec, layer_shapes=tuple(shapes), per_layer_input=table,
                   notes=spec.notes + notes)


def _unused_kv_note(spec: ModelSpec, shapes: list[LayerShape]) -> tuple[str, ...]:
    """vLLM builds qkv_proj and k_norm in a KV-sharing layer too (gemma4.py, gemma3n.py at
    v0.21.0) though the checkpoint holds neither: memory the weights line does not count."""
    unused = sum(s.num_kv_heads * (s.head_dim + s.v_head_dim) * spec.hidden_size + s.head_dim
                 for s in shapes if s.kv_source is not None)
    if not unused:
        return ()
    return (f"vLLM also allocates the K and V projections and K norms of the KV-sharing layers "
            f"({unused:,} parameters the checkpoint does not hold): not counted in the weights",)


def mimo_v2(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """MiMo-V2-Flash: hybrid_layer_pattern 1 marks a sliding-window layer (swa_* heads and
    head sizes, sliding_window_size tokens, sinks with add_swa_attention_sink_bias), 0 a full
    one; K and V head sizes differ (head_dim, v_head_dim); moe_layer_freq 0 marks a dense layer."""
    pattern = cfg.hybrid_layer_pattern
    if pattern is None or len(pattern) != spec.num_layers or set(pattern) - {0, 1}:
        raise SpecError("hybrid_layer_pattern", pattern, f"{spec.num_layers} entries, each 0 "
                        "(full attention) or 1 (sliding window)")
    full = LayerShape(cfg.num_attention_heads, cfg.num_key_value_heads or cfg.num_attention_heads,
                      spec.attention.head_dim, cfg.v_head_dim or spec.attention.head_dim,
                      spec.intermediate_size, sinks=bool(cfg.add_full_attention_sink_bias))
    swa = LayerShape(cfg.swa_num_attention_heads or full.num_heads,
                     cfg.swa_num_key_value_heads or full.num_kv_heads,
                     cfg.swa_head_dim or full.head_dim, cfg.swa_v_head_dim or full.v_head_dim,
                     spec.intermediate_size, sinks=bool(cfg.add_swa_attention_sink_bias))
    window = cfg.sliding_window_size or cfg.sliding_window
    kinds = tuple("sliding" if p else FULL for p in pattern)
    att = replace(spec.attention, layer_kinds=kinds, sliding_window_tokens=window)
    note = (f"{sum(pattern)} sliding-window layers ({swa.num_kv_heads} KV heads) beside "
            f"{len(pattern) - sum(pattern)} full ones ({full.num_kv_heads}); K cached at "
            f"{full.head_dim}, V at {full.v_head_dim} per head")
    return replace(spec, attention=att, layer_shapes=tuple(swa if p else full for p in pattern),
                   notes=spec.notes + (note,))


def laguna(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """Laguna: num_attention_heads_per_layer gives each layer's query heads (KV heads and head
    size are shared); the per-head output gate g_proj (gating)."""
    heads = cfg.num_attention_heads_per_layer
    if heads is not None and len(heads) != spec.num_layers:
        raise SpecError("num_attention_heads_per_layer", heads, f"{spec.num_layers} entries")
    gate = cfg.gating is True or cfg.gating == "per-head"
    if cfg.gating not in (None, False, True, "per-head"):
        raise SpecError("gating", cfg.gating, "true, false or 'per-head' (vLLM's "
                        "LagunaForCausalLM; a per-element gate is not planned)")
    if heads is None:
        return replace(spec, head_gate=gate)
    shapes = tuple(_uniform(spec, n, num_heads=h) for n, h in enumerate(heads))
    return replace(spec, layer_shapes=shapes, head_gate=gate)


def gemma3n(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """Gemma-3n (gemma3n.py Gemma3nAttention): the last num_kv_shared_layers layers read the K
    and V of the layer 1 (full) or 2 (sliding) before the first of them, as the class fixes it;
    intermediate_size gives each layer's width; AltUp (altup_num_inputs streams) and LAuReL
    (laurel_rank) blocks in every layer, and the per-layer embeddings."""
    shared, first = cfg.num_kv_shared_layers or 0, spec.num_layers - (cfg.num_kv_shared_layers
                                                                      or 0)
    widths = cfg.intermediate_size if isinstance(cfg.intermediate_size, list) else \
        [spec.intermediate_size] * spec.num_layers
    shapes = []
    for n in range(spec.num_layers):
        kind = spec.layer_kind(n)
        source = (first - (2 if kind == "sliding" else 1)) if shared and n >= first else None
        if source is not None and (source < 0 or spec.layer_kind(source) != kind):
            raise SpecError("num_kv_shared_layers", shared, f"layer {source} must be a {kind} "
                            f"layer for layer {n} to share its K and V (Gemma3nAttention)")
        shapes.append(_uniform(spec, n, kv_source=source, intermediate=widths[n]))
    ple = cfg.hidden_size_per_layer_input or 0
    table = PerLayerInput(cfg.vocab_size_per_layer_input or spec.vocab_size, ple) if ple else None
    note = (f"{shared} of {spec.num_layers} layers read the K and V of layer {first - 1} (full) "
            f"or {first - 2} (sliding) and cache nothing (num_kv_shared_layers)",) if shared else ()
    note += _unused_kv_note(spec, shapes)
    return replace(spec, layer_shapes=tuple(shapes), per_layer_input=table,
                   altup_inputs=cfg.altup_num_inputs or 0, laurel_rank=cfg.laurel_rank or 0,
                   notes=spec.notes + note)


READERS = {"nemotron-nas": deci_blocks, "gemma4_text": gemma_sharing, "mimo_v2_flash": mimo_v2,
           "laguna": laguna, "gemma3n_text": gemma3n, "phi": phi_block}
