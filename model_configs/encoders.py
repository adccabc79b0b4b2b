"""The vision tower of a multimodal config.json, read as vLLM builds it (ledger/encoders.py):
Gemma3ForConditionalGeneration's SigLIP tower, Gemma4ForConditionalGeneration's Gemma-4
vision tower, Llama4ForConditionalGeneration's Llama-4 tower and Qwen3-VL's (dense and MoE)
tower with its deepstack mergers. Fields a Gemma vision_config leaves out take transformers'
config defaults, and the note says which; a Llama-4 or Qwen3-VL vision_config must state every
field it is counted from; any other wrapper or tower is not read (its note says its weights are
not counted)."""

from servecap.ledger.encoders import (
    GEMMA4_VISION,
    LLAMA4_VISION,
    QWEN3_VISION,
    SIGLIP,
    Encoder,
    encoder_params,
)

from .vision_fields import wrapper_arch

# wrapper architecture -> (the vision_config model_type it builds, the tower it is read as)
TOWERS = {"Gemma3ForConditionalGeneration": ("siglip_vision_model", SIGLIP),
          "Gemma4ForConditionalGeneration": ("gemma4_vision", GEMMA4_VISION),
          "Llama4ForConditionalGeneration": ("llama4_vision_model", LLAMA4_VISION),
          "Qwen3VLForConditionalGeneration": ("qwen3_vl", QWEN3_VISION),
          "Qwen3VLMoeForConditionalGeneration": ("qwen3_vl_moe", QWEN3_VISION)}
# Llama4VisionConfig fields the tower is counted from; a config without one is not read
LLAMA4_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_channels", "image_size", "patch_size", "projector_input_dim",
                 "projector_output_dim", "vision_output_dim")
# Qwen3VLVisionConfig fields the tower is counted from; a config without one is not read
QWEN3_FIELDS = ("hidden_size", "intermediate_size", "depth", "num_heads", "in_channels",
                "patch_size", "temporal_patch_size", "spatial_merge_size",
                "num_position_embeddings", "out_hidden_size")
# transformers' SiglipVisionConfig and Gemma4VisionConfig defaults for what a config omits
SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                   "num_attention_heads": 12, "num_channels": 3, "image_size": 224,
                   "patch_size": 16}
GEMMA4_DEFAULTS = {"num_channels": 3, "standardize": False}


def read_encoder(data: dict) -> tuple[Encoder | None, str]:
    """(the tower, a note) for a wrapper whose vision tower is read; (None, '') otherwise."""
    arch = wrapper_arch(data)  # the same wrapper the encoder budget reads
    vision, text = data.get("vision_config"), data.get("text_config")
    if arch not in TOWERS or not isinstance(vision, dict) or not isinstance(text, dict):
        return None, ""
    model_type, kind = TOWERS[arch]
    if vision.get("model_type", model_type) != model_type or data.get("audio_config") or \
            (kind == SIGLIP and vision.get("vision_use_head")):
        return None, ""
    if kind == LLAMA4_VISION:
        return _llama4(arch, vision, text)
    if kind == QWEN3_VISION:
        return _qwen3(arch, vision)
    defaults = SIGLIP_DEFAULTS if kind == SIGLIP else GEMMA4_DEFAULTS
    filled = sorted(k for k in defaults if vision.get(k) is None)
    v = {**defaults, **{k: x for k, x in vision.items() if x is not None}}
    heads = int(v["num_attention_heads"])
    head_dim = int(v.get("head_dim") or v["hidden_size"] // heads)
    positions = (int(v["image_size"]) // int(v["patch_size"])) ** 2 if kind == SIGLIP \
        else int(v["position_embedding_size"])
    enc = Encoder(kind, int(v["hidden_size"]), int(v["intermediate_size"]),
                  int(v["num_hidden_layers"]), heads, int(v.get("num_key_value_heads") or heads),
                  head_dim, int(v["patch_size"]), int(v["num_channels"]), positions,
                  int(text["hidden_size"]), bool(v.get("standardize")))
    params = encoder_params(enc)[0]
    note = (f"vision_config read as {arch}'s {kind} tower: {params:,} parameters with its "
            "projector, counted for vLLM (the encoder weights line)")
    if filled:
        note += f"; {', '.join(filled)} not stated: transformers' defaults"
    return enc, note


def _llama4(arch: str, vision: dict, text: dict) -> tuple[Encoder | None, str]:
    if any(not isinstance(vision.get(k), int) for k in LLAMA4_FIELDS):
        return None, ""
    v, heads = vision, int(vision["num_attention_heads"])
    enc = Encoder(LLAMA4_VISION, v["hidden_size"], v["intermediate_size"],
                  v["num_hidden_layers"], heads, heads, v["hidden_size"] // heads,
                  v["patch_size"], v["num_channels"],
                  (v["image_size"] // v["patch_size"]) ** 2 + 1, int(text["hidden_size"]),
                  adapter=(v["projector_input_dim"], v["projector_output_dim"],
                           v["vision_output_dim"]),
                  adapter_bias=bool(v.get("multi_modal_projector_bias")))
    params = encoder_params(enc)[0]
    return enc, (f"vision_config read as {arch}'s {LLAMA4_VISION} tower: {params:,} parameters "
                 "with its adapter and projector, counted for vLLM (the encoder weights line)")


def _qwen3(arch: str, vision: dict) -> tuple[Encoder | None, str]:
    levels = vision.get("deepstack_visual_indexes", [])
    if any(not isinstance(vision.get(k), int) for k in QWEN3_FIELDS) or \
            not isinstance(levels, list):
        return None, ""
    v, heads = vision, vision["num_heads"]
    enc = Encoder(QWEN3_VISION, v["hidden_size"], v["intermediate_size"], v["depth"], heads,
                  heads, v["hidden_size"] // heads, v["patch_size"], v["in_channels"],
                  v["num_position_embeddings"], v["out_hidden_size"],
                  merge_size=v["spatial_merge_size"], temporal_patch_size=v["temporal_patch_size"],
                  deepstack_levels=len(levels))
    params = encoder_params(enc)[0]
    return enc, (f"vision_config read as {arch}'s {QWEN3_VISION} tower: {params:,} parameters "
                 f"with its merger and {len(levels)} deepstack mergers, counted for vLLM (the "
                 "encoder weights line)")
