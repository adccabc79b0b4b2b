"""A multimodal config.json's vision tower as ledger/vision.py's VisionSpec: the fields of
vision_config (and the wrapper's mm_tokens_per_image, spatial_merge_size) that decide an item's
tokens and their width. None for a text-only config; a vision_config of a family whose encoder
budget is not modelled is None too (the plan says so when multimodal flags are given)."""

from servecap.ledger.errors import SpecError
from servecap.ledger.vision import (
    GEMMA3,
    GEMMA4,
    GLM4V,
    INTERNVL,
    LLAMA4,
    MISTRAL3,
    QWEN_VL,
    VisionSpec,
)

QWEN2 = {"Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"}
QWEN3 = {"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
         "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}
BY_ARCH = {**dict.fromkeys(QWEN2 | QWEN3, QWEN_VL),
           "Gemma3ForConditionalGeneration": GEMMA3,
           "Gemma4ForConditionalGeneration": GEMMA4,
           "Mistral3ForConditionalGeneration": MISTRAL3,
           "Llama4ForConditionalGeneration": LLAMA4,
           "InternVLChatModel": INTERNVL,
           "Glm4vForConditionalGeneration": GLM4V, "Glm4vMoeForConditionalGeneration": GLM4V}
LLAMA4_MAX_PATCHES = 16  # transformers' Llama4ImageProcessorFast max_patches default


def wrapper_arch(data: dict) -> str | None:
    """The multimodal wrapper vLLM builds for this config: the first of `architectures` whose
    vision tower servecap reads (its encoder budget here, its weights in encoders.py), or None."""
    archs = data.get("architectures") or []
    return next((a for a in archs if a in BY_ARCH), None) if isinstance(archs, list) else None


def vision_spec(data: dict) -> VisionSpec | None:
    """The raw config.json mapping's vision tower, or None."""
    vision = data.get("vision_config")
    arch = wrapper_arch(data)
    if not isinstance(vision, dict) or arch is None:
        return None
    family = BY_ARCH[arch]
    if family == INTERNVL:
        return _internvl(data, vision, arch)
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
    text_hidden = _count(text, "hidden_size", "text_config")
    if family == GLM4V:  # glm4_1v.py: each block's MLP is out_hidden_size wide
        out = _count(vision, "out_hidden_size", "vision_config")
        return VisionSpec(family, arch, _count(vision, "patch_size", "vision_config"),
                          _count(vision, "spatial_merge_size", "vision_config"),
                          _count(vision, "hidden_size", "vision_config"), out,
                          _count(vision, "depth", "vision_config"), out,
                          temporal_patch_size=_count(vision, "temporal_patch_size",
                                                     "vision_config"))
    if family == QWEN_VL:
        levels = len(vision.get("deepstack_visual_indexes") or ())
        out = _count(vision, "out_hidden_size", "vision_config") * (1 + levels)
        return VisionSpec(family, arch, _count(vision, "patch_size", "vision_config"),
                          _count(vision, "spatial_merge_size", "vision_config"),
                          _count(vision, "hidden_size", "vision_config"),
                          _count(vision, "intermediate_size", "vision_config"),
                          _count(vision, "depth", "vision_config"), out,
                          temporal_patch_size=vision.get("temporal_patch_size", 2),
                          version=2 if arch in QWEN2 else 3)
    common = dict(patch_size=_count(vision, "patch_size", "vision_config"),
                  hidden_size=_count(vision, "hidden_size", "vision_config"),
                  intermediate_size=_count(vision, "intermediate_size", "vision_config"),
                  num_layers=_count(vision, "num_hidden_layers", "vision_config"),
                  out_width=text_hidden)
    if family == GEMMA3:
        return VisionSpec(family, arch, merge_size=1,
                          image_size=_count(vision, "image_size", "vision_config"),
                          tokens_per_image=data.get("mm_tokens_per_image", 256), **common)
    if family == GEMMA4:
        return VisionSpec(family, arch, merge_size=vision.get("pooling_kernel_size", 3),
                          tokens_per_image=vision.get("default_output_length", 280),
                          has_audio=bool(data.get("audio_config")), **common)
    if family == LLAMA4:
        return _llama4(data, vision, arch, common)
    return VisionSpec(family, arch, merge_size=data.get("spatial_merge_size", 1),
                      image_size=_count(vision, "image_size", "vision_config"), **common)


def _llama4(data: dict, vision: dict, arch: str, common: dict) -> VisionSpec:
    """mllama4.py: 144 tokens a 336 px tile at pixel_shuffle_ratio 0.5; max_patches is the
    image processor's (config.json's image_processor_config where it says, else its default)."""
    size = _count(vision, "image_size", "vision_config")
    ratio = vision.get("pixel_shuffle_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise SpecError("vision_config.pixel_shuffle_ratio", ratio, "a number in (0, 1]")
    shuffle = int(round(1.0 / ratio ** 2))
    processor = data.get("image_processor_config")
    tiles = processor.get("max_patches") if isinstance(processor, dict) else None
    return VisionSpec(LLAMA4, arch, merge_size=1, image_size=size,
                      tokens_per_image=(size // common["patch_size"]) ** 2 // shuffle,
                      max_tiles=tiles if isinstance(tiles, int) and tiles >= 1
                      else LLAMA4_MAX_PATCHES, **common)


def _internvl(data: dict, vision: dict, arch: str) -> VisionSpec:
    """internvl.py: int((image_size / patch)^2 x downsample_ratio^2) tokens a tile; the tile
    counts are the wrapper's (max_dynamic_patch, use_thumbnail); llm_config is the language
    model whose hidden size mlp1 projects to."""
    text = data.get("llm_config") if isinstance(data.get("llm_config"), dict) else {}
    size = _count(vision, "image_size", "vision_config")
    patch = _count(vision, "patch_size", "vision_config")
    ratio = data.get("downsample_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise SpecError("downsample_ratio", ratio, "a number in (0, 1]")
    dynamic = data.get("dynamic_image_size", True) is not False
    return VisionSpec(INTERNVL, arch, patch, 1, _count(vision, "hidden_size", "vision_config"),
                      _count(vision, "intermediate_size", "vision_config"),
                      _count(vision, "num_hidden_layers", "vision_config"),
                      _count(text, "hidden_size", "llm_config"), image_size=size,
                      tokens_per_image=int((size // patch) ** 2 * ratio ** 2),
                      max_tiles=_count(data, "max_dynamic_patch", "config") if dynamic else 1,
                      min_tiles=_count(data, "min_dynamic_patch", "config") if dynamic else 1,
                      thumbnail=data.get("use_thumbnail") is True,
                      text_model_type=str(text.get("model_type") or ""))


def _count(section: dict, name: str, where: str) -> int:
    value = section.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{where}.{name}", value, "a whole number >= 1 (the encoder budget "
                        "reads it)")
    return value
