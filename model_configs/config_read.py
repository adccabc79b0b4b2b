"""A config.json read as the engines read it: the language model inside a multimodal wrapper,
the model_type its architectures name, omitted fields from transformers' defaults, and only
the fields a ledger line uses validated; the rest are listed as ignored (plan -v)."""

from servecap.ledger.errors import SpecError

from .reading import check_numbers
from .schema import HFConfig
from .transformers_defaults import TRANSFORMERS_VERSION, with_defaults

# model_type -> the one whose shape it has (vLLM dispatches on architectures: Kimi-K2 loads as
# DeepseekV3ForCausalLM)
ALIASES = {"kimi_k2": "deepseek_v3",
           # VL text decoders are their text architecture (vLLM's Qwen3VLMoeForConditional-
           # Generation builds a Qwen3MoeLLMModel; Qwen3VL a Qwen3LLMModel; Qwen2.5-VL a Qwen2
           # model), as are MiMo (MiMoForCausalLM: Qwen2, its MTP layers unloaded) and
           # Phi-3-vision (Phi3VForCausalLM: a Phi-3 language model)
           "qwen3_vl_moe_text": "qwen3_moe", "qwen3_vl_text": "qwen3", "qwen2_5_vl": "qwen2",
           "qwen2_5_vl_text": "qwen2", "qwen2_vl": "qwen2", "qwen2_vl_text": "qwen2",
           "mimo": "qwen2", "phi3_v": "phi3"}
# architectures[0] -> model_type, for a model_type servecap does not know
ARCHITECTURES = {
    "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV32ForCausalLM": "deepseek_v32",
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe",
    "Qwen3NextForCausalLM": "qwen3_next", "NemotronHForCausalLM": "nemotron_h",
    "MiniMaxM2ForCausalLM": "minimax_m2", "GlmMoeDsaForCausalLM": "glm_moe_dsa",
    "Llama4ForCausalLM": "llama4_text", "Phi3ForCausalLM": "phi3",
    "GraniteMoeHybridForCausalLM": "granitemoehybrid", "FalconH1ForCausalLM": "falcon_h1",
}
# a wrapper's model_type -> its text_config's, when the text_config does not say
TEXT_TYPES = {"llama4": "llama4_text", "gemma3": "gemma3_text", "gemma4": "gemma4_text",
              "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text",
              "mistral3": "ministral3", "qwen3_vl": "qwen3_vl_text",
              "qwen3_vl_moe": "qwen3_vl_moe_text", "lfm2_vl": "lfm2", "voxtral": "llama",
              "gemma3n": "gemma3n_text"}
TOWERS = ("vision_config", "audio_config", "img_processor", "vision_tower", "audio_tower")
CARRIED = ("quantization_config", "torch_dtype", "dtype", "architectures",
           "tie_word_embeddings")
READ = frozenset(HFConfig.model_fields)
# fields that change memory, and the model types whose ledger reads them: on any other type a
# set value is refused by name rather than silently planned without it
MEMORY_FIELDS = {
    "attention_chunk_size": {"llama4_text"},
    "hybrid_override_pattern": {"nemotron_h"},
    "linear_num_value_heads": {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"},
    "mamba_num_heads": {"nemotron_h"},
    "mamba_n_heads": {"granitemoehybrid", "falcon_h1"},
    "mamba_d_ssm": {"falcon_h1"},
    "index_head_dim": {"deepseek_v32", "glm_moe_dsa"},
    "global_head_dim": {"gemma4_text"},
    "kv_lora_rank": {"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa"},
    "num_kv_shared_layers": {"gemma4_text", "gemma3n_text"},
    "hidden_size_per_layer_input": {"gemma4_text", "gemma3n_text"},
    "altup_num_inputs": {"gemma3n_text"},
    "block_configs": {"nemotron-nas"},
    "num_attention_heads_per_layer": {"laguna"},
    "hybrid_layer_pattern": {"mimo_v2_flash"},
    "swa_num_key_value_heads": {"mimo_v2_flash"},
    "conv_L_cache": {"lfm2"},
}
# fields a family's vLLM model class does not read, dropped with a note (MiMo-V2-Flash states
# attention_chunk_size 128 beside its sliding_window_size; MiMoV2Attention ignores it)
UNREAD_BY_CLASS = {("mimo_v2_flash", "attention_chunk_size"): "MiMoV2FlashForCausalLM"}
# the GQA families whose model class builds V at its own size (MiMoV2Attention's v_head_dim)
V_HEAD_DIM_TYPES = {"mimo_v2_flash", "deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa"}


def prepare(data: dict) -> tuple[dict, tuple[str, ...], tuple[str, ...]]:
    """(the fields to validate, the names ignored as irrelevant to memory, notes)."""
    notes: list[str] = []
    data = _unwrap(data, notes)
    model_type = _resolve_type(data, notes)
    if model_type is not None:
        data = {**data, "model_type": model_type}
        data = _block_types(data, notes)
        data, filled = with_defaults(model_type, data)
        if filled:
            notes.append(f"{', '.join(filled)} not stated: {model_type}'s defaults in "
                         f"transformers {TRANSFORMERS_VERSION}")
    data = _lift_rope(data)
    kept = {k: v for k, v in data.items() if k in READ}
    for (family, field), cls in UNREAD_BY_CLASS.items():
        if model_type == family and kept.get(field) is not None:
            notes.append(f"{field} {kept.pop(field)} not read: vLLM's {cls} ignores it")
    ignored = tuple(sorted(k for k in data if k not in kept))
    check_numbers(kept)
    _refuse_unread_memory_fields(kept, model_type)
    return kept, ignored, tuple(notes)


def _lift_rope(data: dict) -> dict:
    """M-RoPE's mrope_section from rope_scaling (or transformers 5's rope_parameters), as
    vLLM's uses_mrope reads it (vllm/transformers_utils/config.py at v0.11.0), and a
    partial_rotary_factor kept only inside rope_parameters (Qwen3.5)."""
    out = dict(data)
    for key in ("rope_scaling", "rope_parameters"):
        rope = data.get(key)
        if not isinstance(rope, dict):
            continue
        if rope.get("mrope_section") is not None and out.get("mrope_section") is None:
            out["mrope_section"] = rope["mrope_section"]
        if rope.get("partial_rotary_factor") is not None and \
                out.get("partial_rotary_factor") is None:
            out["partial_rotary_factor"] = rope["partial_rotary_factor"]
    return out


# transformers >= 5 writes Nemotron-H's pattern as layers_block_type (NemotronHConfig
# _list_to_pattern): mamba blocks are its "linear_attention"
BLOCK_TYPES = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*",
               "mlp": "-", "moe": "E"}


def _block_types(data: dict, notes: list[str]) -> dict:
    """Nemotron-H's layers_block_type read as the hybrid_override_pattern it replaces (and its
    length as num_hidden_layers, which such configs leave out)."""
    types = data.get("layers_block_type")
    if data["model_type"] != "nemotron_h" or types is None or \
            data.get("hybrid_override_pattern") is not None:
        return data
    if not isinstance(types, list) or any(t not in BLOCK_TYPES for t in types):
        raise SpecError("layers_block_type", types, "a list, each one of "
                        + ", ".join(BLOCK_TYPES))
    pattern = "".join(BLOCK_TYPES[t] for t in types)
    notes.append(f"layers_block_type read as hybrid_override_pattern {pattern}")
    out = {k: v for k, v in data.items() if k != "layers_block_type"}
    out["hybrid_override_pattern"] = pattern
    if out.get("num_hidden_layers") is None:
        out["num_hidden_layers"] = len(types)
    return out


def _unwrap(data: dict, notes: list[str]) -> dict:
    """Multimodal wrappers keep the language model in text_config: plan that, with the
    wrapper's quantization and dtype; the vision and audio towers are not planned."""
    wrapped = "text_config" if isinstance(data.get("text_config"), dict) or not isinstance(
        data.get("llm_config"), dict) else "llm_config"  # InternVL keeps it in llm_config
    text = data.get(wrapped)
    towers = [k for k in TOWERS if data.get(k)]
    if not isinstance(text, dict) or (wrapped == "text_config" and
                                      data.get("hidden_size") is not None and
                                      data.get("model_type") not in TEXT_TYPES):
        if towers:  # a VL model whose text fields sit at the top (Qwen2.5-VL, Phi-3-vision)
            notes.append(_towers_note(towers))
        return data
    inner = dict(text)
    for key in CARRIED:
        if inner.get(key) is None and data.get(key) is not None:
            inner[key] = data[key]
    if inner.get("model_type") is None and data.get("model_type") in TEXT_TYPES:
        inner["model_type"] = TEXT_TYPES[data["model_type"]]
    notes.append(f"{wrapped} planned (the language model of a multimodal wrapper)")
    if towers:
        notes.append(_towers_note(towers))
    return {**inner, **{f"wrapper.{k}": v for k, v in data.items() if k not in inner}}


TOWERS_NOTE = "weights count the language model only"


def _towers_note(towers: list[str]) -> str:
    return (f"{TOWERS_NOTE}: the {' and '.join(towers)} encoder(s) and projector vLLM also "
            "loads are not counted")


def _resolve_type(data: dict, notes: list[str]) -> str | None:
    from .hf import SUPPORTED

    model_type = data.get("model_type")
    if model_type is None or model_type in SUPPORTED:
        return model_type
    if model_type in ALIASES:
        notes.append(f"model_type {model_type} read as {ALIASES[model_type]} (its shape)")
        return ALIASES[model_type]
    archs = data.get("architectures") or []
    arch = next((a for a in archs if a in ARCHITECTURES), None) if isinstance(archs, list) \
        else None
    if arch is not None:
        notes.append(f"model_type {model_type} read as {ARCHITECTURES[arch]}: architectures "
                     f"names {arch}")
        return ARCHITECTURES[arch]
    return model_type


def _refuse_unread_memory_fields(kept: dict, model_type: str | None) -> None:
    from .hf import SUPPORTED

    if model_type not in SUPPORTED:  # hf.to_spec refuses the family itself, naming its class
        return
    for field, types in MEMORY_FIELDS.items():
        value = kept.get(field)
        if value not in (None, False, 0, "") and model_type not in types:
            raise SpecError(field, value, f"changes the cache, and servecap reads it only for "
                            f"model_type {', '.join(sorted(types))} (this is {model_type})")
    if kept.get("mlp_bias"):
        raise SpecError("mlp_bias", kept["mlp_bias"], "MLP biases are not counted in the "
                        "weights yet; only false is allowed")
    v_dim, head_dim = kept.get("v_head_dim"), kept.get("head_dim")
    if v_dim is not None and v_dim != head_dim and model_type not in V_HEAD_DIM_TYPES:
        raise SpecError("v_head_dim", v_dim, f"differs from head_dim {head_dim}, and vLLM's "
                        f"model class for {model_type} builds V at head_dim; servecap reads "
                        f"it for {', '.join(sorted(V_HEAD_DIM_TYPES))}")
