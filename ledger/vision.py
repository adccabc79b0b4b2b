"""A multimodal model's vision tower as the encoder budget reads it: the config.json fields of
its vision_config (and the wrapper's) that decide how many embedding tokens one image or video
becomes, and how wide each one is when the language model receives it.

The processor defaults that config.json does not hold (Qwen's max_pixels, the video
processor's longest_edge) are the published preprocessor configs' values, named where used
(ledger/encoder_rules.py); --mm-processor-kwargs replaces them."""

from dataclasses import dataclass

QWEN_VL = "qwen_vl"  # Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5 / 3.6 (patches merged 2 x 2)
GEMMA3 = "gemma3"  # SigLIP at 896 px, mm_tokens_per_image per crop (pan & scan)
GEMMA4 = "gemma4"  # soft tokens per image (default_output_length), video as frames
MISTRAL3 = "mistral3"  # Pixtral tower: (edge / (patch x merge))^2 tokens at the longest edge
LLAMA4 = "llama4"  # 336 px tiles, pixel shuffle: 144 tokens a tile, up to max_patches + global
INTERNVL = "internvl"  # 448 px tiles, up to max_dynamic_patch + a thumbnail, 256 tokens a tile
GLM4V = "glm4v"  # GLM-4.1V / 4.5V: Qwen2-VL-like patches merged 2 x 2 within max_pixels
# internvl.py ctx_video_token: the language models whose <|video_pad|> carries InternVL videos
INTERNVL_VIDEO_TEXT = ("qwen2", "qwen3", "qwen3_moe", "gpt_oss")
FAMILIES = (QWEN_VL, GEMMA3, GEMMA4, MISTRAL3, LLAMA4, INTERNVL, GLM4V)


@dataclass(frozen=True)
class VisionSpec:
    """The fields the encoder budget needs. out_width is one embedding token's width as the
    language model receives it (Qwen3-VL's deepstack hands over out_hidden_size x (1 + levels));
    image_size is the tower's native edge (Gemma-3), its longest accepted edge (Pixtral) or its
    tile's edge (Llama-4, InternVL); max_tiles is Llama-4's max_patches or InternVL's
    max_dynamic_patch (1 when dynamic_image_size is off), thumbnail InternVL's use_thumbnail;
    text_model_type is InternVL's language model (whether vLLM takes its videos)."""

    family: str
    architecture: str
    patch_size: int
    merge_size: int  # Qwen / Pixtral spatial_merge_size, Gemma-4's pooling_kernel_size, else 1
    hidden_size: int
    intermediate_size: int
    num_layers: int
    out_width: int
    image_size: int = 0
    tokens_per_image: int = 0  # Gemma-3 mm_tokens_per_image, Gemma-4 default_output_length,
    # Llama-4 / InternVL: the tokens one tile becomes after the pixel shuffle
    temporal_patch_size: int = 1
    version: int = 0  # Qwen: 2 (Qwen2-VL, Qwen2.5-VL) or 3 (Qwen3-VL, Qwen3.5, Qwen3.6)
    has_audio: bool = False
    max_tiles: int = 0
    min_tiles: int = 1
    thumbnail: bool = False
    text_model_type: str = ""

    @property
    def modalities(self) -> tuple[str, ...]:
        """What vLLM's processor accepts for the family (get_supported_mm_limits)."""
        if self.family in (QWEN_VL, GEMMA4, GLM4V) or (
                self.family == INTERNVL and self.text_model_type in INTERNVL_VIDEO_TEXT):
            return ("image", "video")
        return ("image",)
