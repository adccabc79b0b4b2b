"""A multimodal model's encoder cache and the vision encoder's profiling peak, as vLLM budgets
them (read at v0.33.0; the budget, the items and the outputs held through the decoder's
profile are the same at v0.10.2, v0.15.0, v0.19.0 and v0.22.0).

The budget, in embedding tokens (vllm/v1/core/encoder_cache_manager.py
compute_mm_encoder_budget; vllm/multimodal/encoder_budget.py MultiModalBudget):
    max_tokens_per_item = the largest item of any modality a prompt may carry
    encoder_budget      = max(max_num_batched_tokens, max_tokens_per_item)
    items               = max(1, min(budget // max_tokens_per_item,
                                     max_num_seqs x max(1, min(limit, max_model_len // max_tok))))
vLLM profiles with that many items of that modality (vllm/v1/worker/gpu_model_runner.py
profile_run, which logs 'Encoder cache will be initialized with a budget of N tokens, and
profiled with M <modality> items of the maximum feature size'): it runs the vision encoder on
them, keeps their outputs in the encoder cache while the decoder's dummy batch runs, then frees
both. So the profiled peak the KV pool is sized from holds
    encoder cache  = items x max_tokens_per_item x embedding width x dtype bytes
(vLLM 0.11.0 - 0.11.2 zero-pad each output to the whole budget first, items x budget_tokens
rows: the release row's encoder_rows_to_budget, ledger/vllm_row.py)
beside the decoder's runtime peak, and the encoder forward's own working set where that is
larger than the decoder's (two lines: encoder_cache, encoder_profile). Under vLLM the
encoder_profile line also holds what profile_run keeps beside the cache while the decoder runs
(held_bytes: the dummy pixel values, and at 0.11.x-0.12.0 the last unpadded output).
--skip-mm-profiling leaves both out of vLLM's budget: the lines are 0 and a note says what
runtime will need."""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .errors import SpecError
from .lines import Line
from .scheduler_defaults import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
from .units import plural
from .vision import GLM4V, INTERNVL, LLAMA4, MISTRAL3, QWEN_VL, VisionSpec

DEFAULT_LIMIT = 999  # MultiModalConfig.get_limit_per_prompt: an unspecified modality
TP_MODES = ("weights", "data")  # --mm-encoder-tp-mode
# --mm-encoder-tp-mode data takes effect only where the model class sets
# supports_encoder_tp_data (qwen2_vl.py, qwen2_5_vl.py, qwen3_vl.py, which qwen3_5.py's classes
# extend, internvl.py, glm4_1v.py, mllama4.py at v0.19.0); for any other vLLM warns and falls
# back to weights (vllm/config/model.py ModelConfig.__post_init__ at v0.19.0)
DATA_MODE_FAMILIES = frozenset({QWEN_VL, INTERNVL, GLM4V, LLAMA4})


@dataclass(frozen=True)
class EncoderSpec:
    """vLLM's multimodal knobs for one deployment: --limit-mm-per-prompt counts (a modality not
    named allows 999), --mm-processor-kwargs, --mm-encoder-tp-mode, --skip-mm-profiling, and
    the scheduler values the budget reads; image_sizes (WxH) are the load's images, for the
    tokens each becomes."""

    limits: tuple[tuple[str, int], ...] = ()
    processor_kwargs: tuple[tuple[str, object], ...] = ()
    tp_mode: str = "weights"
    skip_profiling: bool = False
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_model_len: int = 8192
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    chunked_prefill: bool = True
    tensor_parallel_size: int = 1
    dtype_bytes: int = 2
    image_sizes: tuple[tuple[int, int], ...] = field(default_factory=tuple)
    rows_to_budget: bool = False  # the release pads each output to the budget (0.11.x)
    qwen3_video_timestamps: bool = False  # the release counts Qwen3 video with timestamps
    holds_inputs: bool = False  # vLLM's profile_run keeps its dummy inputs (held_bytes)

    def __post_init__(self) -> None:
        if self.tp_mode not in TP_MODES:
            raise SpecError("--mm-encoder-tp-mode", self.tp_mode, " or ".join(TP_MODES))
        for modality, count in self.limits:
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise SpecError(f"--limit-mm-per-prompt {modality}", count,
                                "a whole number >= 0")

    def limit(self, modality: str) -> int:
        return dict(self.limits).get(modality, DEFAULT_LIMIT)

    def data_parallel(self, vision: VisionSpec | None) -> bool:
        """The tower runs whole on every rank, each on its share of the items: data mode asked
        for, and a model class that supports it."""
        return (self.tp_mode == "data" and vision is not None
                and vision.family in DATA_MODE_FAMILIES)

    def falls_back(self, vision: VisionSpec | None) -> bool:
        """Data mode asked for where the model class does not support it: vLLM runs weights."""
        return self.tp_mode == "data" and not self.data_parallel(vision)


@dataclass(frozen=True)
class EncoderBudget:
    max_tokens_by_modality: dict[str, int]
    modality: str  # the one profiled (most tokens an item; ties to the later name, as vLLM)
    max_tokens_per_item: int
    budget_tokens: int
    items: int
    cache_bytes: int
    activation_bytes: int
    how: str
    held_bytes: int = 0  # what the profile keeps beside the cache (held_bytes below)
    held_how: str = ""

    @property
    def held_tokens(self) -> int:
        return self.items * self.max_tokens_per_item


def scheduled(enc: EncoderSpec, max_num_batched_tokens: int, max_model_len: int,
              max_num_seqs: int, tensor_parallel_size: int, dtype_bytes: int) -> EncoderSpec:
    """The multimodal knobs with the deployment's scheduler values and model dtype."""
    return replace(enc, max_num_batched_tokens=max_num_batched_tokens,
                   max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                   tensor_parallel_size=tensor_parallel_size, dtype_bytes=dtype_bytes)


def encoder_budget(vision: VisionSpec, enc: EncoderSpec) -> EncoderBudget | None:
    """None when every modality is limited to 0 (vLLM: 'Encoder cache will not be
    initialized')."""
    from .encoder_rules import max_tokens  # each family's rules: only for a vision model

    _check_modalities(vision, enc)
    if enc.falls_back(vision):
        enc = replace(enc, tp_mode="weights")
    kwargs = dict(enc.processor_kwargs)
    found = {m: max_tokens(vision, m, kwargs, enc.max_model_len, enc.limit("image") > 0,
                           enc.qwen3_video_timestamps)
             for m in vision.modalities if enc.limit(m) > 0}
    if not found:
        return None
    modality = max(found, key=lambda m: (found[m][0], m))
    tokens, patches, rule = found[modality]
    budget = max(enc.max_num_batched_tokens, tokens)
    per_prompt = max(1, min(enc.limit(modality), enc.max_model_len // tokens))
    reqs = enc.max_num_seqs if enc.chunked_prefill \
        else min(enc.max_num_seqs, enc.max_num_batched_tokens // tokens)
    items = max(1, min(budget // tokens, reqs * per_prompt))
    rows = budget if enc.rows_to_budget else tokens
    cache = items * rows * vision.out_width * enc.dtype_bytes
    act, act_how = activation_bytes(vision, enc, items, patches)
    padded = (f" padded to the budget's {budget:,} rows (vLLM 0.11.x profile_run)"
              if enc.rows_to_budget and budget > tokens else "")
    how = (f"{plural(items, f'{modality} item')} x {tokens:,} tokens ({rule}){padded} x "
           f"{vision.out_width:,} wide x {enc.dtype_bytes} B; budget max(max_num_batched_tokens "
           f"{enc.max_num_batched_tokens:,}, {tokens:,}) = {budget:,} tokens")
    held, held_how = held_bytes(vision, enc, items, _output_rows(vision, tokens, patches),
                                patches, budget)
    return EncoderBudget({m: v[0] for m, v in found.items()}, modality, tokens, budget, items,
                         cache, act, how + f"; encoder forward {act_how}", held, held_how)


def _output_rows(vision: VisionSpec, tokens: int, patches: int) -> int:
    """The rows one item's encoder output has: Qwen and GLM-4V towers merge patches
    merge x merge (the budget's tokens may count more: Qwen3-VL's video timestamps)."""
    if vision.family in (QWEN_VL, GLM4V):
        return patches // vision.merge_size ** 2
    return tokens


def held_bytes(vision: VisionSpec, enc: EncoderSpec, items: int, rows: int, patches: int,
               budget: int) -> tuple[int, str]:
    """What the profile keeps beside the cache through the decoder's dummy run and sampler
    (vllm/v1/worker/gpu_model_runner.py profile_run, v0.10 to v0.33): the dummy batch's pixel
    values on the GPU, in the model dtype (batched_dummy_mm_inputs is a live local; the
    processor's output is cast to the model dtype, vllm/multimodal/processing.py
    _postprocess_output), and, where the outputs are padded to the budget (v0.11.x, v0.12.0),
    the last unpadded output, which the padding loop's variable `output` keeps until
    `output = self._dummy_sampler_run(...)` returns."""
    per_patch = 3 * vision.patch_size ** 2 * vision.temporal_patch_size
    if not enc.holds_inputs:
        return 0, ""
    pixels = items * patches * per_patch * enc.dtype_bytes
    padded = enc.rows_to_budget and rows < budget  # vLLM: encoder_output_shape[0] < budget
    last = rows * vision.out_width * enc.dtype_bytes if padded else 0
    tail = f" + the last unpadded output {last:,} B ({rows:,} rows)" if last else ""
    return pixels + last, (f"held beside the cache: the dummy pixel values {pixels:,} B "
                           f"({items} x {patches:,} patches x {per_patch:,} x "
                           f"{enc.dtype_bytes} B){tail}")


def activation_bytes(vision: VisionSpec, enc: EncoderSpec, items: int,
                     patches_per_item: int) -> tuple[int, str]:
    """An estimate of the vision encoder's working set while it runs the profile's items at
    once: the pixel input, and the larger of one layer's attention (residual, its norm, q/k/v
    and the output; flash attention keeps no seq x seq matrix) and its MLP (residual, norm, the
    up projection and its activation). --mm-encoder-tp-mode weights splits the projections over
    tp; data gives each rank ceil(items / tp) items whole."""
    tp = enc.tensor_parallel_size
    split = tp if enc.tp_mode == "weights" else 1
    on_rank = items if enc.tp_mode == "weights" else -(-items // tp)
    n = on_rank * patches_per_item
    h, i = vision.hidden_size, vision.intermediate_size
    pixels = n * 3 * vision.patch_size ** 2 * vision.temporal_patch_size
    attention = n * (2 * h + 4 * h // split)
    mlp = n * (2 * h + 2 * i // split)
    total = (pixels + max(attention, mlp)) * enc.dtype_bytes
    return total, (f"~{total / 2**30:.2f} GiB ({n:,} patches x (pixels + the larger of "
                   f"attention and MLP), width {h:,}/{i:,}, estimated)")


def encoder_lines(vision: VisionSpec | None, enc: EncoderSpec | None,
                  runtime_peak: int) -> tuple[tuple[Line, ...], tuple[str, ...]]:
    """(the encoder_cache and encoder_profile lines, notes); nothing for a text-only plan."""
    if enc is None or vision is None:
        return (), ()
    fallback = []
    if enc.falls_back(vision):
        fallback = [f"--mm-encoder-tp-mode data: {vision.architecture} does not support it, so "
                    "vLLM falls back to weights (it warns 'This model does not support "
                    "`--mm-encoder-tp-mode data`'): the tower is split over the ranks"]
    found = encoder_budget(vision, enc)
    if found is None:
        return (), ("every modality is limited to 0 (--limit-mm-per-prompt): vLLM initializes "
                    "no encoder cache",)
    notes = [f"vLLM will log: Encoder cache will be initialized with a budget of "
             f"{found.budget_tokens} tokens, and profiled with {found.items} {found.modality} "
             f"items of the maximum feature size",
             "the encoder's activation peak is an estimate (patches x layer widths); "
             "`servecap reconcile` with the startup log checks the pool it leaves"]
    notes += _image_notes(vision, enc, found) + fallback
    extra = found.held_bytes + max(0, found.activation_bytes - runtime_peak)
    held = f"{found.held_how}; + " if found.held_how else ""
    if enc.skip_profiling:
        notes.append(f"--skip-mm-profiling: vLLM reserves neither the encoder cache "
                     f"({found.cache_bytes:,} B) nor the encoder's peak; requests with "
                     f"images need that memory from outside the KV pool")
        return (), tuple(notes)
    return (Line("encoder_cache", "multimodal encoder cache (profiled)", found.cache_bytes,
                 found.how),
            Line("encoder_profile", "vision encoder peak beyond runtime peak", extra,
                 f"{held}encoder forward {found.activation_bytes:,} B - runtime peak"
                 f" {runtime_peak:,} B, floored at 0 (vLLM's profile peaks at the "
                 "larger)")), \
        tuple(notes)


def _check_modalities(vision: VisionSpec, enc: EncoderSpec) -> None:
    from .encoder_rules import KWARGS

    for modality, _ in enc.limits:
        if modality not in vision.modalities and modality != "audio":
            raise SpecError("--limit-mm-per-prompt", modality, f"this model takes "
                            f"{', '.join(vision.modalities)}")
    for key, _ in enc.processor_kwargs:
        if key not in KWARGS[vision.family]:
            raise SpecError("--mm-processor-kwargs", key, f"one of "
                            f"{', '.join(KWARGS[vision.family])} for {vision.architecture}")


def _image_notes(vision: VisionSpec, enc: EncoderSpec, found: EncoderBudget) -> list[str]:
    """The load's images (--image-size): tokens each, and how many the budget holds."""
    out = []
    if vision.family == LLAMA4 and enc.image_sizes:
        return [f"--image-size: each image is counted at the largest, "
                f"{found.max_tokens_per_item:,} tokens (Llama-4's tile fit per image size is "
                "not modelled)"]
    for width, height in enc.image_sizes:
        tokens = image_tokens(vision, width, height, dict(enc.processor_kwargs))
        out.append(f"a {width}x{height} image is {tokens:,} tokens: the budget of "
                   f"{found.budget_tokens:,} holds {found.budget_tokens // tokens} of them")
    return out


def image_tokens(vision: VisionSpec, width: int, height: int,
                 kwargs: Mapping[str, object]) -> int:
    """Tokens one image of width x height becomes (Qwen's and GLM's smart_resize, Pixtral's
    scale-down, InternVL's tile grid; Gemma's are fixed by the tower)."""
    from .encoder_rules import glm4v_max_pixels, internvl_image_tiles, max_tokens, qwen_max_pixels

    if vision.family == QWEN_VL:
        unit = vision.patch_size * vision.merge_size
        w, h = _smart_resize(width, height, unit, qwen_max_pixels(vision, kwargs))
        return (w // unit) * (h // unit)
    if vision.family == GLM4V:  # two frames (the temporal patch) inside longest_edge pixels
        unit = vision.patch_size * vision.merge_size
        t = vision.temporal_patch_size
        w, h = _smart_resize(width, height, unit, glm4v_max_pixels(kwargs) // t,
                             min_pixels=112 * 112 // t)
        return (w // unit) * (h // unit)
    if vision.family == INTERNVL:
        return internvl_image_tiles(vision, kwargs, width, height) * vision.tokens_per_image
    if vision.family == MISTRAL3:
        scale = max(width / vision.image_size, height / vision.image_size)
        if scale > 1:
            width, height = int(width / scale), int(height / scale)
        merged = vision.patch_size * vision.merge_size
        return ((width - 1) // merged + 1) * ((height - 1) // merged + 1)
    return max_tokens(vision, "image", kwargs, 0)[0]


def _smart_resize(width: int, height: int, factor: int, max_pixels: int,
                  min_pixels: int = 56 * 56) -> tuple[int, int]:
    """Qwen's smart_resize: round each side to the factor, then scale into the pixel bounds."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return w, h
