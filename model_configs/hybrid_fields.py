"""Per-layer kinds and fixed states of the hybrid families, read from their config.json fields
the way vLLM's model classes read them (vllm/model_executor/models/qwen3_next.py,
nemotron_h.py, llama4.py, gemma4.py)."""

from servecap.ledger.errors import SpecError
from servecap.ledger.model import CHUNKED, FULL, LINEAR, MAMBA, NONE, SLIDING, StateShape

GDN_TYPES = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}
LAYER_TYPE_NAMES = {"full_attention": FULL, "sliding_attention": SLIDING,
                    "linear_attention": LINEAR, "chunked_attention": CHUNKED,
                    "mamba": MAMBA, "attention": FULL}
# Nemotron-H's hybrid_override_pattern: M Mamba-2, * attention, - MLP, E MoE
PATTERN = {"M": MAMBA, "*": FULL, "-": NONE, "E": NONE}


def hybrid_kinds(cfg, layers: int) -> tuple[str, ...] | None:
    """The kinds of a hybrid's layers, or None for a family without per-layer state/chunks."""
    if cfg.model_type in GDN_TYPES:
        if cfg.layer_types is not None:
            return layer_types(cfg.layer_types, layers)
        every = cfg.full_attention_interval or 4
        return tuple(FULL if (i + 1) % every == 0 else LINEAR for i in range(layers))
    if cfg.model_type == "nemotron_h":
        return _pattern(cfg.hybrid_override_pattern, layers)
    if cfg.model_type == "llama4_text" and cfg.attention_chunk_size:
        # Llama4DecoderLayer: RoPE layers ((i + 1) % 4 != 0) attend within a chunk; every
        # fourth (NoPE) layer attends to the whole context
        return tuple(FULL if (i + 1) % 4 == 0 else CHUNKED for i in range(layers))
    return None


def layer_types(types: list[str], layers: int) -> tuple[str, ...]:
    if len(types) != layers or any(t not in LAYER_TYPE_NAMES for t in types):
        raise SpecError("layer_types", types, f"{layers} entries, each one of "
                        + ", ".join(LAYER_TYPE_NAMES))
    return tuple(LAYER_TYPE_NAMES[t] for t in types)


def _pattern(pattern: str | None, layers: int) -> tuple[str, ...]:
    if pattern is None or len(pattern) != layers or any(c not in PATTERN for c in pattern):
        raise SpecError("hybrid_override_pattern", pattern, f"{layers} characters, each M "
                        "(Mamba-2), * (attention), - (MLP) or E (MoE)")
    return tuple(PATTERN[c] for c in pattern)


def state_shape(cfg, model_dtype: str) -> StateShape | None:
    """The state one layer keeps per request: dtypes as vLLM keeps them (conv in the model
    dtype; the recurrent state in mamba_ssm_cache_dtype: the config's mamba_ssm_dtype or
    mamba_ssm_cache_dtype when it names one, Nemotron-H's float16 when it names none
    (NemotronHForCausalLMConfig), else the model dtype ('auto'))."""
    if cfg.model_type in GDN_TYPES:
        hk, hv = _need(cfg, "linear_num_key_heads"), _need(cfg, "linear_num_value_heads")
        dk, dv = _need(cfg, "linear_key_head_dim"), _need(cfg, "linear_value_head_dim")
        kernel = _need(cfg, "linear_conv_kernel_dim")
        ssm = cfg.mamba_ssm_cache_dtype or cfg.mamba_ssm_dtype or model_dtype
        return StateShape(LINEAR, 2 * hk * dk + hv * dv, kernel, hv, (dv, dk), model_dtype, ssm)
    if cfg.model_type == "nemotron_h":
        heads, dim = _need(cfg, "mamba_num_heads"), _need(cfg, "mamba_head_dim")
        groups, d_state = _need(cfg, "n_groups"), _need(cfg, "ssm_state_size")
        inner = heads * dim
        ssm = cfg.mamba_ssm_cache_dtype or cfg.mamba_ssm_dtype or "float16"
        return StateShape(MAMBA, inner + 2 * groups * d_state, _need(cfg, "conv_kernel"), heads,
                          (dim, d_state), model_dtype, ssm, groups, d_state, inner)
    return None


def _need(cfg, field: str) -> int:
    value = getattr(cfg, field)
    if value is None:
        raise SpecError(field, None, f"required for model_type {cfg.model_type}")
    return value
