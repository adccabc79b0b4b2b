"""The most embedding tokens one multimodal item can become, per family, as vLLM's processors
compute it for the encoder budget (get_mm_max_tokens_per_item, read at v0.33.0):

- Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 / Qwen3.6 (vllm/model_executor/models/qwen2_vl.py,
  qwen3_vl.py): an image at the size with most features holds max_pixels // (patch x merge)^2
  merged patches (factored into a grid no more than 200:1); Qwen3 video: the video processor's
  longest_edge // temporal_patch_size the same way (two frames, one temporal patch); Qwen2
  video: as many frames as fit max_model_len, at most 14, two frames a temporal patch.
- Gemma-3 (gemma3_mm.py): mm_tokens_per_image for the image and one more set per pan-and-scan
  crop (do_pan_and_scan, pan_and_scan_max_num_crops, off by default).
- Gemma-4 (gemma4_mm.py): max_soft_tokens (70, 140, 280, 560 or 1120; else the vision
  config's default_output_length) an image; a video 32 frames x (70 + 2 + 6) tokens.
- Mistral-3 / Pixtral (mistral3.py): ceil(edge / (patch x spatial_merge))^2 at the processor's
  longest_edge (the vision config's image_size unless --mm-processor-kwargs size says).

Each rule also gives the patches the tower runs for that item (for its activation estimate)."""

from collections.abc import Mapping

from .errors import SpecError
from .vision import GEMMA3, GEMMA4, MISTRAL3, QWEN_VL, VisionSpec

# Processor defaults config.json does not hold (the published preprocessor configs):
QWEN2_MAX_PIXELS = 12_845_056  # Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json max_pixels
QWEN3_MAX_PIXELS = 16_777_216  # Qwen/Qwen3-VL-8B-Instruct preprocessor_config.json longest_edge
QWEN3_VIDEO_LONGEST_EDGE = 25_165_824  # Qwen/Qwen3-VL-8B-Instruct video_preprocessor_config.json
QWEN_MAX_ASPECT = 200  # qwen2_vl.py get_image_size_with_most_features
QWEN2_MAX_FRAMES_PER_VIDEO = 14  # qwen2_vl.py _MAX_FRAMES_PER_VIDEO
GEMMA3_MAX_CROPS = 4  # Gemma3ImageProcessor.pan_and_scan_max_num_crops
GEMMA4_SOFT_TOKENS = (70, 140, 280, 560, 1120)  # gemma4_mm.py _SUPPORTED_SOFT_TOKENS
GEMMA4_VIDEO_FRAMES = 32  # gemma4_mm.py _VIDEO_MAX_FRAMES
GEMMA4_VIDEO_FRAME_TOKENS = 70 + 2 + 6  # _VIDEO_MAX_SOFT_TOKENS, boi + eoi, timestamp tokens

# --mm-processor-kwargs keys each family reads for the maximum (others change nothing here)
KWARGS = {QWEN_VL: ("max_pixels", "min_pixels", "size"),
          GEMMA3: ("do_pan_and_scan", "pan_and_scan_max_num_crops", "pan_and_scan_min_crop_size",
                   "pan_and_scan_min_ratio_to_activate"),
          GEMMA4: ("max_soft_tokens",), MISTRAL3: ("size",)}


def max_tokens(vision: VisionSpec, modality: str, kwargs: Mapping[str, object],
               max_model_len: int) -> tuple[int, int, str]:
    """(embedding tokens, tower patches, how) for the largest item of one modality."""
    rule = {QWEN_VL: _qwen, GEMMA3: _gemma3, GEMMA4: _gemma4, MISTRAL3: _mistral3}[vision.family]
    return rule(vision, modality, kwargs, max_model_len)


def _qwen(vision, modality, kwargs, max_model_len):
    unit = vision.patch_size * vision.merge_size
    merged = vision.merge_size ** 2
    pixels = qwen_max_pixels(vision, kwargs)
    image = _grid_tokens(pixels // (unit * unit))
    if modality == "image":
        return image, image * merged, (f"max_pixels {pixels:,} / ({vision.patch_size} x "
                                       f"{vision.merge_size})^2 = {image:,} tokens")
    if vision.version >= 3:
        edge = QWEN3_VIDEO_LONGEST_EDGE
        video = _grid_tokens(edge // vision.temporal_patch_size // (unit * unit))
        return video, video * merged, (f"video longest_edge {edge:,} / temporal "
                                       f"{vision.temporal_patch_size} / {unit}^2 = {video:,}")
    frames = _qwen2_frames(image, vision.temporal_patch_size, max_model_len)
    video = -(-frames // vision.temporal_patch_size) * image
    return video, video * merged, (f"{frames} frames (max_model_len {max_model_len:,}, at "
                                   f"most {QWEN2_MAX_FRAMES_PER_VIDEO}) x {image:,} tokens / "
                                   f"{vision.temporal_patch_size}")


def qwen_max_pixels(vision: VisionSpec, kwargs) -> int:
    size = kwargs.get("size")
    if isinstance(size, Mapping) and size.get("longest_edge") is not None:
        return _whole("size.longest_edge", size["longest_edge"])
    if kwargs.get("max_pixels") is not None:
        return _whole("max_pixels", kwargs["max_pixels"])
    return QWEN3_MAX_PIXELS if vision.version >= 3 else QWEN2_MAX_PIXELS


def _grid_tokens(seq_len: int) -> int:
    """The most merged patches a grid holds with no side more than 200x the other (vLLM
    factors seq_len and steps down until an aspect ratio fits)."""
    for n in range(seq_len, 0, -1):
        d = next(d for d in range(int(n ** 0.5), 0, -1) if n % d == 0)
        if (n // d) / d <= QWEN_MAX_ASPECT:
            return n
    return 1


def _qwen2_frames(image_tokens: int, temporal: int, max_model_len: int) -> int:
    """qwen2_vl.py get_num_frames_with_most_features for one video: the most frames whose
    tokens fit max_model_len, at most 14, at least 1."""
    frames = 1
    while -(-(frames + 1) // temporal) * image_tokens <= max_model_len:
        frames += 1
    return max(min(frames, QWEN2_MAX_FRAMES_PER_VIDEO), 1)


def _gemma3(vision, modality, kwargs, max_model_len):
    crops = 0
    if _flag(kwargs.get("do_pan_and_scan", False)):
        crops = _whole("pan_and_scan_max_num_crops",
                       kwargs.get("pan_and_scan_max_num_crops", GEMMA3_MAX_CROPS))
        crops = crops if crops >= 2 else 0
    tokens = vision.tokens_per_image * (1 + crops)
    patches = (1 + crops) * (vision.image_size // vision.patch_size) ** 2
    how = f"{vision.tokens_per_image} tokens" + (f" x (1 + {crops} pan-and-scan crops)"
                                                if crops else " (pan and scan off)")
    return tokens, patches, how


def _gemma4(vision, modality, kwargs, max_model_len):
    pool = vision.merge_size ** 2
    if modality == "video":
        tokens = GEMMA4_VIDEO_FRAMES * GEMMA4_VIDEO_FRAME_TOKENS
        return tokens, GEMMA4_VIDEO_FRAMES * 70 * pool, (
            f"{GEMMA4_VIDEO_FRAMES} frames x ({GEMMA4_VIDEO_FRAME_TOKENS - 8} + 8) tokens")
    asked = kwargs.get("max_soft_tokens")
    soft = asked if isinstance(asked, int) and asked in GEMMA4_SOFT_TOKENS \
        else vision.tokens_per_image
    return soft, soft * pool, f"{soft} soft tokens an image"


def _mistral3(vision, modality, kwargs, max_model_len):
    size = kwargs.get("size")
    edge = vision.image_size
    if isinstance(size, Mapping) and size.get("longest_edge") is not None:
        edge = _whole("size.longest_edge", size["longest_edge"])
    merged = vision.patch_size * vision.merge_size
    side = (edge - 1) // merged + 1
    return side * side, side * side * vision.merge_size ** 2, (
        f"({edge} px / ({vision.patch_size} x {vision.merge_size}))^2 = {side}^2 tokens")


def _whole(field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"--mm-processor-kwargs {field}", value, "a whole number >= 1")
    return value


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise SpecError("--mm-processor-kwargs do_pan_and_scan", value, "true or false")
    return value
