"""Per-layer kinds and fixed states of the hybrid families, read from their config.json fields
the way vLLM's model classes read them (vllm/model_executor/models/qwen3_next.py,
nemotron_h.py, llama4.py, gemma4.py; granitemoehybrid.py at vllm-project/vllm commit
fc41bfe8ebdbe69a333da8eeb0c17bf22741d1d4 and falcon_h1.py at commit
59e459897da422926a8c401c975d8765f0a3e1d1, get_mamba_state_shape_from_config)."""

from servecap.ledger.errors import SpecError
from servecap.ledger.model import (
    CHUNKED,
    CONV,
    FULL,
    LINEAR,
    MAMBA,
    NONE,
    SLIDING,
    StateShape,
)

GDN_TYPES = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}
LAYER_TYPE_NAMES = {"full_attention": FULL, "sliding_attention": SLIDING,
                    "linear_attention": LINEAR, "chunked_attention": CHUNKED,
                    "mamba": MAMBA, "attention": FULL, "conv": CONV}
# Nemotron-H's hybrid_override_pattern: M Mamba-2, * attention, - MLP, E MoE
PATTERN = {"M": MAMBA, "*": FULL, "-": NONE, "E": NONE}
# Granite-4's layer_types; transformers renames them linear_attention / full_attention (its
# default, when the config states none, is every layer Mamba-2)
GRANITE_TYPES = {"mamba": MAMBA, "linear_attention": MAMBA, "attention": FULL,
                 "full_attention": FULL}
MAMBA2_TYPES = {"granitemoehybrid", "falcon_h1"}  # Mamba-2 fields spelt mamba_n_heads, ...


def hybrid_kinds(cfg, layers: int) -> tuple[str, ...] | None:
    """The kinds of a hybrid's layers, or None for a family without per-layer state/chunks."""
    if cfg.model_type in GDN_TYPES:
        if cfg.layer_types is not None:
            return layer_types(cfg.layer_types, layers)
        every = cfg.full_attention_interval or 4
        return tuple(FULL if (i + 1) % every == 0 else LINEAR for i in range(layers))
    if cfg.model_type == "nemotron_h":
        return _pattern(cfg.hybrid_override_pattern, layers)
    if cfg.model_type == "granitemoehybrid":
        return _granite_types(cfg.layer_types, layers)
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


def _granite_types(types: list[str] | None, layers: int) -> tuple[str, ...]:
    if types is None:
        return (MAMBA,) * layers
    if len(types) != layers or any(t not in GRANITE_TYPES for t in types):
        raise SpecError("layer_types", types, f"{layers} entries, each one of "
                        + ", ".join(GRANITE_TYPES))
    return tuple(GRANITE_TYPES[t] for t in types)


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
    if cfg.model_type in MAMBA2_TYPES:
        return _mamba2_state(cfg, model_dtype)
    if cfg.model_type == "lfm2":  # ShortConv: a conv state only, in the model dtype
        dim = cfg.conv_dim or _need(cfg, "hidden_size")
        return StateShape(CONV, dim, _need(cfg, "conv_L_cache"), 0, (0, 0), model_dtype,
                          model_dtype, conv_bias=bool(cfg.conv_bias))
    return None


def lfm2_width(cfg) -> int:
    """Lfm2MLP's width (vllm/model_executor/models/lfm2.py at v0.21.0): with
    block_auto_adjust_ff_dim, int(2 x intermediate / 3), x block_ffn_dim_multiplier, rounded up
    to a multiple of block_multiple_of; else intermediate_size as stated."""
    width = _need(cfg, "intermediate_size")
    if not cfg.block_auto_adjust_ff_dim:
        return width
    width = int(2 * width / 3)
    if cfg.block_ffn_dim_multiplier is not None:
        width = int(cfg.block_ffn_dim_multiplier * width)
    multiple = _need(cfg, "block_multiple_of")
    return multiple * -(-width // multiple)


def window_pattern(pattern, layers: int, default: int) -> tuple[str, ...]:
    """sliding_window_pattern as the config classes expand it: a whole number p makes every
    p-th layer full (Gemma-3, EXAONE-4); a string of L (local: sliding) and G (global: full)
    repeats over the layers (EXAONE-4's 'LLLG', the same as 4)."""
    pattern = default if pattern is None else pattern
    if isinstance(pattern, str):
        if not pattern or set(pattern) - {"L", "G"}:
            raise SpecError("sliding_window_pattern", pattern, "a whole number >= 1 or a "
                            "string of L (sliding) and G (global) layers, e.g. 'LLLG'")
        return tuple(FULL if pattern[i % len(pattern)] == "G" else SLIDING
                     for i in range(layers))
    return tuple(FULL if (i + 1) % pattern == 0 else SLIDING for i in range(layers))


def _mamba2_state(cfg, model_dtype: str) -> StateShape:
    """Granite-4 and Falcon-H1: MambaMixer2 with intermediate = mamba_expand x hidden_size
    (Falcon-H1: mamba_d_ssm when set); both states in the model dtype (vLLM's
    mamba2_state_dtype with mamba_cache_dtype and mamba_ssm_cache_dtype 'auto': neither family's
    vLLM config hook sets them)."""
    heads, groups = _need(cfg, "mamba_n_heads"), _need(cfg, "mamba_n_groups")
    d_state, kernel = _need(cfg, "mamba_d_state"), _need(cfg, "mamba_d_conv")
    falcon = cfg.model_type == "falcon_h1"
    inner = cfg.mamba_d_ssm if falcon and cfg.mamba_d_ssm else \
        _need(cfg, "mamba_expand") * _need(cfg, "hidden_size")
    dim = _head_dim(cfg.mamba_d_head, inner, heads)
    if dim * heads != inner:
        raise SpecError("mamba_d_head", cfg.mamba_d_head, f"mamba_d_head x mamba_n_heads = "
                        f"the Mamba intermediate size {inner:,} ({heads} heads)")
    return StateShape(MAMBA, inner + 2 * groups * d_state, kernel, heads, (dim, d_state),
                      model_dtype, model_dtype, groups, d_state, inner,
                      conv_bias=cfg.mamba_conv_bias is not False,
                      gated_norm=not falcon or bool(cfg.mamba_rms_norm),
                      in_proj_bias=bool(cfg.mamba_proj_bias),
                      out_proj_bias=bool(cfg.projectors_bias if falcon else cfg.mamba_proj_bias))


def _head_dim(value, inner: int, heads: int) -> int:
    """mamba_d_head, or 'auto': intermediate / heads (the config class's __post_init__)."""
    if value is None or value == "auto":
        return inner // heads
    if isinstance(value, str):
        raise SpecError("mamba_d_head", value, "a whole number >= 1 or 'auto'")
    return value


def _need(cfg, field: str) -> int:
    value = getattr(cfg, field)
    if value is None:
        raise SpecError(field, None, f"required for model_type {cfg.model_type}")
    return value
