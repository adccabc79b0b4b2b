"""Interpret Hugging Face config fields as a ModelSpec, per model_type; unknown ones fail closed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servecap.ledger import dtypes
from servecap.ledger.errors import SpecError
from servecap.ledger.model import FULL, SLIDING, Attention, ModelSpec, MoE

from .families import refine
from .hybrid_fields import (
    GDN_TYPES,
    hybrid_kinds,
    layer_types,
    lfm2_width,
    state_shape,
    window_pattern,
)
from .quant import parse_quantization

if TYPE_CHECKING:  # a bundled YAML is read without the pydantic models (bundled.py)
    from .schema import HFConfig

DENSE = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3",
         "ministral3", "qwen3_5_text", "falcon_h1", "exaone4", "olmo2", "olmo3", "lfm2",
         "nemotron-nas", "gemma3n_text", "granite", "phi"}
MOE_TYPES = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss",
             "deepseek_v32", "glm_moe_dsa", "qwen3_next", "qwen3_5_moe_text", "nemotron_h",
             "minimax_m2", "llama4_text", "gemma4_text", "granitemoehybrid", "laguna",
             "mimo_v2_flash"}
SUPPORTED = tuple(sorted(DENSE | MOE_TYPES))
FOUR_NORMS = {"gemma2", "gemma3_text", "gemma4_text", "gemma3n_text"}
MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa"}
QK_NORM = {"qwen3", "qwen3_moe", "gemma3_text", "gemma4_text", "qwen3_next", "qwen3_5_text",
           "qwen3_5_moe_text", "exaone4", "olmo2", "olmo3", "lfm2", "laguna", "gemma3n_text"}
QK_NORM_ALL_HEADS = {"olmo2", "olmo3"}  # q_norm over H x d, k_norm over H_kv x d (Olmo2Attention)
WINDOW_PATTERN = {"gemma3_text": 6, "exaone4": 4}  # the config classes' default pattern
ROUTER_BIAS = {"deepseek_v3", "gpt_oss", "deepseek_v32", "glm_moe_dsa", "nemotron_h",
               "minimax_m2", "laguna", "mimo_v2_flash"}


def to_spec(cfg: HFConfig, name: str, source: str, num_parameters: int | None = None,
            notes: tuple[str, ...] = ()) -> ModelSpec:
    """A full architecture when model_type is known; a KV-only spec when only a parameter count
    and the KV shape are given (the seed's teaching case)."""
    if cfg.model_type is None:
        return _kv_only(cfg, name, source, num_parameters, notes)
    if cfg.model_type not in SUPPORTED:
        from .vllm_classes import unsupported  # vLLM's class registry: only to refuse

        raise unsupported(cfg)
    layers = _need(cfg, "num_hidden_layers")
    att, att_notes = _attention(cfg, layers)
    dtype = _checkpoint_dtype(cfg)
    return refine(cfg, ModelSpec(
        name=name, source=source, num_layers=layers, attention=att,
        hidden_size=_need(cfg, "hidden_size"), intermediate_size=_intermediate(cfg, layers),
        vocab_size=_need(cfg, "vocab_size"), tie_word_embeddings=_tied(cfg),
        norms_per_layer=_norms(cfg), moe=_moe(cfg, layers),
        gated_mlp=cfg.model_type != "nemotron_h", mlp_layers=_mlp_layers(cfg, layers),
        quant=parse_quantization(cfg.quantization_config), num_parameters=num_parameters,
        checkpoint_dtype=dtype,
        max_position_embeddings=cfg.max_position_embeddings or 0, model_type=cfg.model_type,
        architecture=(cfg.architectures or [""])[0],
        notes=notes + att_notes + _mtp_note(cfg) + _mrope_note(cfg),
        mrope=_mrope(cfg),
        state=state_shape(cfg, _short_dtype(dtype)) if set(att.layer_kinds) - {FULL, SLIDING}
        - {"chunked"} or cfg.model_type == "falcon_h1" else None,
        parallel_state=cfg.model_type == "falcon_h1",
    ))


# vLLM's Qwen-VL classes, whose official checkpoints state M-RoPE sections in rope_scaling
# (Qwen3-VL: mrope_section [24, 20, 20], interleaved): read as M-RoPE where a kept copy of the
# config lost its rope_scaling (the classes compute M-RoPE positions, get_mrope_input_positions)
MROPE_CLASSES = frozenset({"Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
                           "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"})


def _mrope(cfg: HFConfig) -> bool:
    return cfg.mrope_section is not None or (cfg.architectures or [""])[0] in MROPE_CLASSES


def _mrope_note(cfg: HFConfig) -> tuple[str, ...]:
    if cfg.mrope_section is not None or not _mrope(cfg):
        return ()
    return (f"M-RoPE read from the class: {cfg.architectures[0]}'s checkpoints state "
            "rope_scaling.mrope_section, this config states no rope_scaling",)


def _short_dtype(name: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name, name)


def _norms(cfg: HFConfig) -> int:
    if cfg.model_type == "nemotron_h":
        return 1  # one pre-norm per block: each layer is one mixer or one MLP
    return 4 if cfg.model_type in FOUR_NORMS else 2


def _mlp_layers(cfg: HFConfig, layers: int) -> tuple[int, ...] | None:
    """Nemotron-H: only its '-' (MLP) and 'E' (MoE) layers have a feed-forward block."""
    if cfg.model_type != "nemotron_h" or not cfg.hybrid_override_pattern:
        return None
    return tuple(i for i, c in enumerate(cfg.hybrid_override_pattern[:layers]) if c in "-E")


def _intermediate(cfg: HFConfig, layers: int) -> int:
    """Dense MLP width; 0 when every layer is MoE and the config states none (Qwen3.5-MoE);
    Llama-4's dense layers use intermediate_size_mlp (intermediate_size is the experts')."""
    if cfg.model_type == "llama4_text" and cfg.intermediate_size_mlp:
        return cfg.intermediate_size_mlp
    if cfg.model_type == "granitemoehybrid":
        return _need(cfg, "shared_intermediate_size")  # the shared MLP (the dense one, no MoE)
    if cfg.model_type == "nemotron-nas":
        return 0  # per layer, from block_configs (families.deci_blocks)
    if cfg.model_type == "lfm2":
        return lfm2_width(cfg)
    if isinstance(cfg.intermediate_size, list):  # Gemma-3n: per layer (families.gemma3n)
        if cfg.model_type != "gemma3n_text" or len(cfg.intermediate_size) != layers:
            raise SpecError("intermediate_size", cfg.intermediate_size, "a whole number (one "
                            f"per layer, {layers}, only for gemma3n_text)")
        return max(cfg.intermediate_size)
    moe = _moe(cfg, layers)
    if cfg.intermediate_size is None and moe is not None and not moe.dense_layers:
        return 0
    return _need(cfg, "intermediate_size")


def _need(cfg: HFConfig, field: str) -> int:
    value = getattr(cfg, field)
    if value is None:
        raise SpecError(field, None, f"required for model_type {cfg.model_type}")
    if value < 1:
        raise SpecError(field, value, "must be >= 1")
    return value


def _checkpoint_dtype(cfg: HFConfig) -> str:
    """The stored dtype, checked here so a bad one is reported against the file."""
    field = "torch_dtype" if cfg.torch_dtype is not None or cfg.dtype is None else "dtype"
    value = cfg.torch_dtype or cfg.dtype or "bfloat16"
    dtypes.lookup(value, field, dtypes.WEIGHT_DTYPES)
    return value


def _tied(cfg: HFConfig) -> bool:
    if cfg.tie_word_embeddings is not None:
        return cfg.tie_word_embeddings
    return cfg.model_type in {"gemma", "gemma2", "gemma3_text"}  # their configs' class default


def _kv_only(cfg, name, source, num_parameters, notes) -> ModelSpec:
    if num_parameters is None:
        raise SpecError("model_type", None, "give model_type (one of: " + ", ".join(SUPPORTED)
                        + ") or num_parameters with the KV shape")
    layers = _need(cfg, "num_hidden_layers")
    kv_heads = _need(cfg, "num_key_value_heads")
    heads = cfg.num_attention_heads or kv_heads
    _check_heads(heads, kv_heads)
    att = Attention("gqa", heads, kv_heads, _need(cfg, "head_dim"))
    return ModelSpec(name=name, source=source, num_layers=layers, attention=att,
                     num_parameters=num_parameters, notes=notes,
                     checkpoint_dtype=_checkpoint_dtype(cfg))


def _check_heads(heads: int, kv_heads: int) -> None:
    if heads % kv_heads:
        raise SpecError("num_attention_heads", heads, f"must be a multiple of "
                        f"num_key_value_heads = {kv_heads} (grouped-query attention)")


def _attention(cfg: HFConfig, layers: int) -> tuple[Attention, tuple[str, ...]]:
    heads = _need(cfg, "num_attention_heads")
    if cfg.model_type in MLA_TYPES:
        return _mla(cfg, heads), ()
    kv_heads = cfg.num_key_value_heads if cfg.num_key_value_heads is not None else heads
    if kv_heads < 1:
        raise SpecError("num_key_value_heads", kv_heads, "must be >= 1")
    _check_heads(heads, kv_heads)
    notes: tuple[str, ...] = ()
    head_dim = cfg.head_dim
    if head_dim is None:
        if _need(cfg, "hidden_size") % heads:
            raise SpecError("head_dim", None, f"required: hidden_size {cfg.hidden_size} is "
                            f"not a multiple of num_attention_heads {heads}")
        head_dim = cfg.hidden_size // heads
        notes = (f"head_dim not stated: hidden_size / num_attention_heads = {head_dim}, "
                 f"as transformers derives it for {cfg.model_type}",)
    window, kinds = _windows(cfg, layers)
    kinds = hybrid_kinds(cfg, layers) or kinds
    full_dim, full_heads = _full_shape(cfg)
    att = Attention(
        "gqa", heads, kv_heads, head_dim,
        qkv_bias=cfg.model_type in {"qwen2", "qwen2_moe"} or bool(cfg.attention_bias),
        qk_norm=cfg.model_type in QK_NORM or bool(cfg.use_qk_norm and cfg.model_type
                                                   == "minimax_m2"),
        sinks=cfg.model_type == "gpt_oss", sliding_window_tokens=window, layer_kinds=kinds,
        chunk_size_tokens=cfg.attention_chunk_size if cfg.model_type == "llama4_text" else None,
        full_head_dim=full_dim, full_kv_heads=full_heads, rotary_dim=_rotary_dim(cfg, head_dim),
        q_gate=cfg.model_type == "qwen3_next" or bool(cfg.attn_output_gate),
        qk_norm_heads=cfg.model_type == "minimax_m2" or cfg.model_type in QK_NORM_ALL_HEADS)
    return att, notes


def _rotary_dim(cfg: HFConfig, head_dim: int) -> int:
    """Rotated dims when only part of a head rotates: rotary_dim as stated, else head_dim x
    partial_rotary_factor, as vLLM's get_rope takes it (0: the whole head)."""
    if cfg.rotary_dim:
        return cfg.rotary_dim
    factor = cfg.partial_rotary_factor
    return int(head_dim * factor) if factor is not None and 0 < factor < 1 else 0


def _full_shape(cfg: HFConfig) -> tuple[int, int]:
    """Gemma-4's full-attention layers: global_head_dim wide, num_global_key_value_heads when
    K doubles as V (attention_k_eq_v), both still cached."""
    if cfg.model_type != "gemma4_text" or not cfg.global_head_dim:
        return 0, 0
    heads = cfg.num_global_key_value_heads if cfg.attention_k_eq_v else 0
    return cfg.global_head_dim, heads or 0


def _mla(cfg: HFConfig, heads: int) -> Attention:
    for field in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        _need(cfg, field)
    indexer = cfg.index_head_dim if cfg.model_type in {"deepseek_v32", "glm_moe_dsa"} else 0
    return Attention("mla", heads, heads, cfg.qk_nope_head_dim + cfg.qk_rope_head_dim,
                     q_lora_rank=cfg.q_lora_rank, kv_lora_rank=cfg.kv_lora_rank,
                     qk_rope_head_dim=cfg.qk_rope_head_dim,
                     qk_nope_head_dim=cfg.qk_nope_head_dim, v_head_dim=cfg.v_head_dim,
                     indexer_head_dim=indexer or 0,
                     indexer_heads=(cfg.index_n_heads or 0) if indexer else 0)


def _windows(cfg: HFConfig, layers: int) -> tuple[int | None, tuple[str, ...]]:
    """Which layers attend within a window: layer_types when given, else the model family's
    rule (Gemma-2 alternates from layer 0; Gemma-3 has one full layer per pattern)."""
    window = cfg.sliding_window
    if cfg.model_type in GDN_TYPES:
        return None, ()
    if cfg.layer_types is not None:
        return window, layer_types(cfg.layer_types, layers)
    if window is None or cfg.use_sliding_window is False:
        return None, ()
    if cfg.model_type == "gemma2":
        return window, tuple(SLIDING if i % 2 == 0 else FULL for i in range(layers))
    if cfg.model_type in WINDOW_PATTERN:
        return window, window_pattern(cfg.sliding_window_pattern, layers,
                                      WINDOW_PATTERN[cfg.model_type])
    if cfg.model_type in {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}:
        first = cfg.max_window_layers if cfg.max_window_layers is not None else layers
        return window, tuple(SLIDING if i >= first else FULL for i in range(layers))
    return window, (SLIDING,) * layers


def _moe(cfg: HFConfig, layers: int) -> MoE | None:
    experts = cfg.num_local_experts or cfg.num_experts or cfg.n_routed_experts
    if cfg.model_type not in MOE_TYPES or not experts or (
            cfg.model_type == "gemma4_text" and not cfg.enable_moe_block):
        return None
    top_k = cfg.top_k_experts if cfg.model_type == "gemma4_text" else None
    top_k = top_k or _need(cfg, "num_experts_per_tok")
    if top_k > experts:
        raise SpecError("num_experts_per_tok", top_k, f"at most the {experts} routed experts")
    inter = cfg.moe_intermediate_size or _need(cfg, "intermediate_size")
    shared_inter = (cfg.shared_expert_intermediate_size or cfg.moe_shared_expert_intermediate_size
                    or 0)
    shared = cfg.n_shared_experts or (1 if shared_inter else 0)
    if cfg.model_type == "llama4_text":
        shared, shared_inter = 1, inter
    if cfg.model_type == "granitemoehybrid":  # GraniteMoeHybridMLP beside the experts
        shared, shared_inter = 1, _need(cfg, "shared_intermediate_size")
    return MoE(experts, top_k, inter, num_shared_experts=shared,
               shared_intermediate_size=shared_inter,
               dense_layers=_dense_layers(cfg, layers),
               router_bias=cfg.model_type in ROUTER_BIAS,
               shared_expert_gate=cfg.model_type in {"qwen2_moe", "qwen3_next",
                                                     "qwen3_5_moe_text"},
               expert_bias=cfg.model_type == "gpt_oss",
               latent_size=(cfg.moe_latent_size or 0) if cfg.model_type == "nemotron_h" else 0)


def _dense_layers(cfg: HFConfig, layers: int) -> tuple[int, ...]:
    if cfg.model_type == "llama4_text":
        step = cfg.interleave_moe_layer_step or 1
        return tuple(i for i in range(layers) if (i + 1) % step != 0)
    if cfg.model_type == "nemotron_h":
        return tuple(i for i, c in enumerate(cfg.hybrid_override_pattern or "") if c == "-")
    if cfg.mlp_layer_types is not None:  # Laguna: "dense" or "sparse" per layer
        return tuple(i for i, t in enumerate(cfg.mlp_layer_types[:layers]) if t == "dense")
    if isinstance(cfg.moe_layer_freq, list):  # MiMo-V2: 0 marks a dense layer
        return tuple(i for i, f in enumerate(cfg.moe_layer_freq[:layers]) if not f)
    if cfg.first_k_dense_replace:
        return tuple(range(min(cfg.first_k_dense_replace, layers)))
    step = cfg.decoder_sparse_step or 1
    only = set(cfg.mlp_only_layers or [])
    return tuple(i for i in range(layers) if i in only or (i + 1) % step != 0)


def _mtp_note(cfg: HFConfig) -> tuple[str, ...]:
    if cfg.num_nextn_predict_layers:
        return (f"{cfg.num_nextn_predict_layers} multi-token-prediction layer(s) in the checkpoint"
                " are not loaded for plain decoding and are not counted",)
    return ()
