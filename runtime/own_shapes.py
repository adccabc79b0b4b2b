"""The refusals for what the newer families' vLLM classes build and this runtime does not run
yet, each by the config field that asks for it (model_configs/families.py reads them)."""

from servecap.ledger.errors import SpecError
from servecap.ledger.model import CONV, ModelSpec

PLAN_IT = "; plan it with servecap plan"


def refuse_own_shapes(spec: ModelSpec) -> None:
    """Per-layer shapes, per-layer embeddings, short convolutions and head gates: one line
    naming the field and the family that has it."""
    if CONV in spec.attention.layer_kinds:
        raise SpecError("layer kind", CONV, "the runtime does not run gated short "
                        "convolutions (LFM2's ShortConv) yet" + PLAN_IT)
    shapes = spec.layer_shapes
    if any(s.kv_source is not None for s in shapes):
        raise SpecError("num_kv_shared_layers", sum(s.kv_source is not None for s in shapes),
                        "the runtime does not run layers that read another layer's K and V "
                        "(Gemma-4 E2B) yet" + PLAN_IT)
    if any(not s.attention or not s.intermediate for s in shapes):
        raise SpecError("block_configs", "no_op", "the runtime does not run no-op attention or "
                        "feed-forward blocks (DeciLM / Llama-Nemotron NAS) yet" + PLAN_IT)
    if any(s.v_head_dim != s.head_dim for s in shapes):
        raise SpecError("v_head_dim", next(s.v_head_dim for s in shapes
                                           if s.v_head_dim != s.head_dim),
                        "the runtime caches V at K's head size only (MiMo-V2's is narrower) "
                        "yet" + PLAN_IT)
    if len({(s.num_heads, s.num_kv_heads, s.head_dim) for s in shapes}) > 1:
        raise SpecError("layer shapes", "per layer", "the runtime builds one attention shape "
                        "for every layer (Laguna's and DeciLM's differ) yet" + PLAN_IT)
    if spec.per_layer_input is not None:
        raise SpecError("hidden_size_per_layer_input", spec.per_layer_input.width, "the runtime "
                        "does not run per-layer embeddings (Gemma-3n/4) yet" + PLAN_IT)
    if spec.head_gate:
        raise SpecError("gating", True, "the runtime does not run a per-head output gate "
                        "(Laguna's g_proj) yet" + PLAN_IT)
