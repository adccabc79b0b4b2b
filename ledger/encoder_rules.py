"""The most embedding tokens one multimodal item can become, per family, as vLLM's processors
compute it for the encoder budget (get_mm_max_tokens_per_item, read at v0.33.0):

- Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 / Qwen3.6 (vllm/model_executor/models/qwen2_vl.py,
  qwen3_vl.py): an image at the size with most features holds max_pixels // (patch x merge)^2
  merged patches (factored into a grid no more than 200:1); Qwen3 video: the video processor's
  longest_edge // temporal_patch_size the same way (two frames, one temporal patch); Qwen2
  video: as many frames as fit max_model_len, at most 14, two frames a temporal patch.
  vLLM 0.11.0 - 0.12.x (video_timestamps, the release row's qwen3_video_timestamps) count a
  Qwen3 video otherwise (qwen3_vl.py get_max_video_tokens at v0.11.0 and v0.12.0): as many
  frames of the largest image as fit max_model_len (qwen2_vl.py _get_max_video_frames, from
  two frames; at most _MAX_FRAMES_PER_VIDEO = 24,576), resized by the video processor's
  smart_resize to at most longest_edge pixels over all frames (transformers'
  models/qwen3_vl/video_processing_qwen3_vl.py), and the soft tokens x 12.5 (a video token
  becomes '<{t} seconds>', about 9.5 tokens, and three vision tokens).
- Gemma-3 (gemma3_mm.py): mm_tokens_per_image for the image and one more set per pan-and-scan
  crop (do_pan_and_scan, pan_and_scan_max_num_crops, off by default).
- Gemma-4 (gemma4_mm.py): max_soft_tokens (70, 140, 280, 560 or 1120; else the vision
  config's default_output_length) an image; a video 32 frames x (70 + 2 + 6) tokens.
- Mistral-3 / Pixtral (mistral3.py): ceil(edge / (patch x spatial_merge))^2 at the processor's
  longest_edge (the vision config's image_size unless --mm-processor-kwargs size says).
- Llama-4 (mllama4.py Mllama4ProcessingInfo, the same at v0.19.0): the dummy image is
  image_size wide and max_patches tiles tall (get_image_size_with_most_features), so it is cut
  into max_patches tiles and a global tile (one tile alone has no global one); each tile is
  (image_size / patch)^2 // round(1 / pixel_shuffle_ratio^2) patch tokens
  (get_patch_per_chunk), and only those tokens are embeddings (get_num_embeds).
- InternVL (internvl.py, vllm/transformers_utils/processors/internvl.py, the same at v0.19.0):
  max_dynamic_patch tiles (1 with dynamic_image_size off) and a thumbnail tile where more than
  one (use_thumbnail), each int((image_size / patch)^2 x downsample_ratio^2) tokens. Where the
  language model is Qwen2/Qwen3/gpt-oss a video is one tile a frame, and its dummy holds as
  many frames as max_model_len leaves beside one largest image
  (get_num_frames_with_most_features).
- GLM-4.1V / GLM-4.5V (glm4_1v.py, the same at v0.19.0): an image at the size with most
  features, smart_resize with two frames (the temporal patch) inside the image processor's
  longest_edge pixels: floor(sqrt(longest_edge / 2) / (patch x merge))^2 merged patches. The
  video dummy (frames sampled and timestamped by the video processor) is not modelled: a video
  limit of 0 is required.

Each rule also gives the patches the tower runs for that item (for its activation estimate)."""

import math
from collections.abc import Mapping

from .errors import SpecError
from .vision import GEMMA3, GEMMA4, GLM4V, INTERNVL, LLAMA4, MISTRAL3, QWEN_VL, VisionSpec

# Processor defaults config.json does not hold (the published preprocessor configs):
QWEN2_MAX_PIXELS = 12_845_056  # Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json max_pixels
QWEN3_MAX_PIXELS = 16_777_216  # Qwen/Qwen3-VL-8B-Instruct preprocessor_config.json longest_edge
QWEN3_VIDEO_LONGEST_EDGE = 25_165_824  # Qwen/Qwen3-VL-8B-Instruct video_preprocessor_config.json
QWEN_MAX_ASPECT = 200  # qwen2_vl.py get_image_size_with_most_features
QWEN2_MAX_FRAMES_PER_VIDEO = 14  # qwen2_vl.py _MAX_FRAMES_PER_VIDEO
QWEN3_MAX_FRAMES_PER_VIDEO = 24_576  # qwen3_vl.py _MAX_FRAMES_PER_VIDEO at v0.11.0, v0.12.0
QWEN3_TIMESTAMP_TOKENS = 12.5  # qwen3_vl.py get_max_video_tokens at v0.11.0, v0.12.0
GEMMA3_MAX_CROPS = 4  # Gemma3ImageProcessor.pan_and_scan_max_num_crops
GEMMA4_SOFT_TOKENS = (70, 140, 280, 560, 1120)  # gemma4_mm.py _SUPPORTED_SOFT_TOKENS
GEMMA4_VIDEO_FRAMES = 32  # gemma4_mm.py _VIDEO_MAX_FRAMES
GEMMA4_VIDEO_FRAME_TOKENS = 70 + 2 + 6  # _VIDEO_MAX_SOFT_TOKENS, boi + eoi, timestamp tokens
# zai-org/GLM-OCR preprocessor_config.json size.longest_edge (a pixel area), the GLM-V image
# processors' value; GLM-4.1V / 4.5V's own file is not kept here, so the plan says it assumed it
GLM4V_MAX_PIXELS = 9_633_792

# --mm-processor-kwargs keys each family reads for the maximum (others change nothing here)
KWARGS = {QWEN_VL: ("max_pixels", "min_pixels", "size"),
          GEMMA3: ("do_pan_and_scan", "pan_and_scan_max_num_crops", "pan_and_scan_min_crop_size",
                   "pan_and_scan_min_ratio_to_activate"),
          GEMMA4: ("max_soft_tokens",), MISTRAL3: ("size",), LLAMA4: ("max_patches",),
          INTERNVL: ("max_dynamic_patch", "min_dynamic_patch", "dynamic_image_size",
                     "use_thumbnail"),
          GLM4V: ("max_pixels", "size")}


def max_tokens(vision: VisionSpec, modality: str, kwargs: Mapping[str, object],
               max_model_len: int, with_image: bool = True,
               video_timestamps: bool = False) -> tuple[int, int, str]:
    """(embedding tokens, tower patches, how) for the largest item of one modality;
    with_image: images are allowed too (InternVL's video dummy leaves room for one);
    video_timestamps: a Qwen3 video as vLLM 0.11.0 - 0.12.x counts it."""
    if vision.family == INTERNVL:
        return _internvl(vision, modality, kwargs, max_model_len, with_image)
    if video_timestamps and vision.family == QWEN_VL and vision.version >= 3 \
            and modality == "video":
        return _qwen3_video_timestamps(vision, kwargs, max_model_len)
    rule = {QWEN_VL: _qwen, GEMMA3: _gemma3, GEMMA4: _gemma4, MISTRAL3: _mistral3,
            LLAMA4: _llama4, GLM4V: _glm4v}[vision.family]
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


def _qwen3_video_timestamps(vision, kwargs, max_model_len):
    """vLLM 0.11.0 - 0.12.x: the most frames whose soft tokens fit max_model_len, as tokens
    with their timestamps (x 12.5); the tower runs the soft tokens' patches."""
    unit = vision.patch_size * vision.merge_size
    side = _qwen_image_side(qwen_max_pixels(vision, kwargs), unit)
    frames = 2  # _get_max_video_frames(start_num_frames=2): stop before the first too many
    while frames < QWEN3_MAX_FRAMES_PER_VIDEO and \
            _qwen3_video_soft(vision, side, frames + 1) <= max_model_len:
        frames += 1
    soft = _qwen3_video_soft(vision, side, frames)
    tokens = int(soft * QWEN3_TIMESTAMP_TOKENS)
    return tokens, soft * vision.merge_size ** 2, (
        f"{frames:,} frames of {side} px (max_model_len {max_model_len:,}, at most "
        f"{QWEN3_MAX_FRAMES_PER_VIDEO:,}) in {QWEN3_VIDEO_LONGEST_EDGE:,} px = {soft:,} soft "
        f"tokens x {QWEN3_TIMESTAMP_TOKENS} with timestamps")


def _qwen_image_side(max_pixels: int, unit: int) -> int:
    """get_image_size_with_most_features: a 9,999,999 px square through the image
    processor's smart_resize."""
    edge = 9_999_999
    beta = math.sqrt(edge * edge / max_pixels)
    return max(unit, math.floor(edge / beta / unit) * unit)


def _qwen3_video_soft(vision, side: int, frames: int) -> int:
    """Soft tokens of `frames` frames of side x side px: transformers' Qwen3-VL video
    smart_resize (all frames' pixels within longest_edge, sides multiples of patch x merge),
    then (frames padded to the temporal patch) x grid / merge^2 (qwen3_vl.py _get_vision_info)."""
    unit = vision.patch_size * vision.merge_size
    temporal = vision.temporal_patch_size
    h = round(side / unit) * unit
    t_bar = round(frames / temporal) * temporal
    if t_bar * h * h > QWEN3_VIDEO_LONGEST_EDGE:
        beta = math.sqrt(frames * side * side / QWEN3_VIDEO_LONGEST_EDGE)
        h = max(unit, math.floor(side / beta / unit) * unit)
    grid_t = max((frames + frames % temporal) // temporal, 1)
    grid = h // vision.patch_size
    return grid_t * grid * grid // vision.merge_size ** 2


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


def _llama4(vision, modality, kwargs, max_model_len):
    tiles = _whole("max_patches", kwargs.get("max_patches", vision.max_tiles))
    chunks = tiles + 1 if tiles > 1 else 1
    per_tile = vision.tokens_per_image
    side = vision.image_size // vision.patch_size
    return chunks * per_tile, chunks * (side * side + 1), (
        f"({tiles} tiles + 1 global) x {per_tile} tokens a {vision.image_size} px tile"
        if tiles > 1 else f"1 tile x {per_tile} tokens")


def _internvl_grid(vision: VisionSpec, kwargs: Mapping[str, object]) -> tuple[int, int, bool]:
    """(min_dynamic_patch, max_dynamic_patch, use_thumbnail) as the processor resolves them:
    both 1 with dynamic_image_size off (resolve_min_max_num)."""
    dynamic = _flag(kwargs.get("dynamic_image_size", True), "dynamic_image_size")
    most = _whole("max_dynamic_patch", kwargs.get("max_dynamic_patch", vision.max_tiles)) \
        if dynamic else 1
    least = _whole("min_dynamic_patch", kwargs.get("min_dynamic_patch", vision.min_tiles)) \
        if dynamic else 1
    if least > most:
        raise SpecError("--mm-processor-kwargs min_dynamic_patch", least,
                        f"at most max_dynamic_patch ({most})")
    return least, most, _flag(kwargs.get("use_thumbnail", vision.thumbnail), "use_thumbnail")


def internvl_tiles(vision: VisionSpec, kwargs: Mapping[str, object]) -> int:
    """The most tiles one image becomes: max_dynamic_patch, and the thumbnail beside them."""
    _, most, thumbnail = _internvl_grid(vision, kwargs)
    return most + 1 if thumbnail and most != 1 else most


def internvl_image_tiles(vision: VisionSpec, kwargs: Mapping[str, object], width: int,
                        height: int) -> int:
    """Tiles one width x height image becomes: the grid of at most max_dynamic_patch tiles
    closest to its aspect ratio (find_closest_aspect_ratio; a tie goes to the larger grid
    when the image covers half of it), and the thumbnail where more than one."""
    least, most, thumbnail = _internvl_grid(vision, kwargs)
    ratios = sorted({(i, j) for n in range(least, most + 1) for i in range(1, n + 1)
                     for j in range(1, n + 1) if least <= i * j <= most},
                    key=lambda r: r[0] * r[1])  # get_internvl_target_ratios, set order kept
    best, best_diff = (1, 1), float("inf")
    for i, j in ratios:
        diff = abs(width / height - i / j)
        if diff < best_diff:
            best, best_diff = (i, j), diff
        elif diff == best_diff and width * height > 0.5 * vision.image_size ** 2 * i * j:
            best = (i, j)
    blocks = best[0] * best[1]
    return blocks + 1 if thumbnail and blocks != 1 else blocks


def _internvl(vision, modality, kwargs, max_model_len, with_image):
    per_tile = vision.tokens_per_image
    side = vision.image_size // vision.patch_size
    tiles = internvl_tiles(vision, kwargs)
    if modality == "image":
        return tiles * per_tile, tiles * side * side, (
            f"{tiles} tiles of {vision.image_size} px x {per_tile} tokens")
    image = tiles * per_tile if with_image else 0
    frames = max((max_model_len - image) // per_tile, 1)
    return frames * per_tile, frames * side * side, (
        f"{frames} frames (max_model_len {max_model_len:,}"
        + (f" less one image's {image:,}" if image else "") + f") x {per_tile} tokens; the "
        f"tokenizer is taken to hold <|video_pad|> ({vision.text_model_type} language model)")


def glm4v_max_pixels(kwargs: Mapping[str, object]) -> int:
    if kwargs.get("max_pixels") is not None:
        return _whole("max_pixels", kwargs["max_pixels"])
    size = kwargs.get("size")
    if isinstance(size, Mapping) and size.get("longest_edge") is not None:
        return _whole("size.longest_edge", size["longest_edge"])
    return GLM4V_MAX_PIXELS


def _glm4v(vision, modality, kwargs, max_model_len):
    if modality == "video":
        raise SpecError("--limit-mm-per-prompt video", "> 0", f"0 for {vision.architecture}: "
                        "its video budget (sampled, timestamped frames) is not modelled; add "
                        "'{\"video\": 0}'")
    pixels = glm4v_max_pixels(kwargs)
    unit = vision.patch_size * vision.merge_size
    side = math.isqrt(pixels // vision.temporal_patch_size) // unit
    tokens = side * side
    assumed = "" if kwargs.get("max_pixels") or kwargs.get("size") else ", assumed"
    return tokens, tokens * vision.merge_size ** 2, (
        f"longest_edge {pixels:,} px{assumed} / {vision.temporal_patch_size} frames: "
        f"{side * unit} px square / {unit}^2 = {tokens:,} tokens")


def _whole(field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"--mm-processor-kwargs {field}", value, "a whole number >= 1")
    return value


def _flag(value, field: str = "do_pan_and_scan") -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"--mm-processor-kwargs {field}", value, "true or false")
    return value
