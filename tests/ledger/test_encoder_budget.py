"""The encoder budget against vLLM's own startup lines ('Encoder cache will be initialized with
a budget of N tokens, and profiled with M <modality> items'), two families, and the rules'
properties."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servecap.ledger.encoder import EncoderSpec, encoder_budget, encoder_lines, image_tokens
from servecap.ledger.errors import SpecError
from servecap.model_configs import load_model
from servecap.model_configs.vision_fields import vision_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "encoder"
LINE = re.compile(r"budget of (\d+) tokens, and profiled with (\d+) (\w+) items")


def _vision(name: str):
    return load_model(str(FIXTURES / "configs" / name / "config.json")).spec.vision


def _raw_vision(name: str):
    """The tower of a config whose language model servecap does not plan (GLM-4.5V's MoE)."""
    return vision_spec(json.loads((FIXTURES / "configs" / name / "config.json").read_text()))


def _logged(name: str) -> tuple[int, int, str]:
    found = LINE.search((LOGS / name).read_text())
    return int(found[1]), int(found[2]), found[3]


@pytest.mark.parametrize(("log", "config", "enc"), [
    # vLLM 0.22.0, --max-num-batched-tokens 32768 --max-num-seqs 8 --max-model-len 200000
    ("qwen3.6-35b-a3b_v0.22.0.log", "Qwen--Qwen3.6-35B-A3B",
     EncoderSpec(max_num_batched_tokens=32768, max_num_seqs=8, max_model_len=200000)),
    # vLLM 0.17.1's default batch (8,192 on an H100 server; any default <= 16,384 gives this)
    ("qwen3-vl_v0.17.1.log", "Qwen--Qwen3-VL-8B-Instruct",
     EncoderSpec(max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=262144)),
    # the CPU build's LLM class: 4,096 batched tokens, 256 sequences
    ("gemma4_cpu.log", "google--gemma-4-E2B-it",
     EncoderSpec(max_num_batched_tokens=4096, max_num_seqs=256, max_model_len=131072)),
])
def test_vllms_logged_budget_and_profiled_items(log, config, enc):
    budget, items, modality = _logged(log)
    found = encoder_budget(_vision(config), enc)
    assert (found.budget_tokens, found.items, found.modality) == (budget, items, modality)


def test_every_gemma4_size_profiles_one_video_at_4096():
    """The video rule is the processor's constants, not the tower's size."""
    for name in ("google--gemma-4-E2B-it", "google--gemma-4-26B-A4B",
                 "nvidia--Gemma-4-31B-IT-NVFP4"):
        found = encoder_budget(_vision(name), EncoderSpec(max_num_batched_tokens=4096))
        assert (found.budget_tokens, found.items, found.modality) == (4096, 1, "video")
        assert found.max_tokens_by_modality["image"] == 280
        assert found.how.startswith("1 video item x "), found.how  # was '1 video items'


def test_cache_bytes_are_items_tokens_width_dtype():
    """Qwen3-VL-8B hands the language model out_hidden_size x (1 + 3 deepstack levels)."""
    vision = _vision("Qwen--Qwen3-VL-8B-Instruct")
    found = encoder_budget(vision, EncoderSpec(max_num_batched_tokens=8192))
    assert vision.out_width == 4096 * 4
    assert found.cache_bytes == 1 * 16384 * 4096 * 4 * 2


def test_max_pixels_and_limits_move_the_budget():
    vision = _vision("Qwen--Qwen2.5-VL-7B-Instruct")
    small = encoder_budget(vision, EncoderSpec(limits=(("video", 0),),
                                               processor_kwargs=(("max_pixels", 1003520),)))
    assert small.max_tokens_by_modality == {"image": 1280}  # 1003520 / 28^2
    assert (small.budget_tokens, small.items) == (8192, 6)
    video = encoder_budget(vision, EncoderSpec(max_model_len=128000))
    assert (video.modality, video.max_tokens_per_item) == ("video", 7 * 16384)
    assert encoder_budget(vision, EncoderSpec(limits=(("image", 0), ("video", 0)))) is None


def test_gemma3_pan_and_scan_and_the_load_images():
    vision = _vision("google--gemma-3-27b-it")
    assert encoder_budget(vision, EncoderSpec()).max_tokens_per_item == 256
    crops = encoder_budget(vision, EncoderSpec(processor_kwargs=(("do_pan_and_scan", True),)))
    assert crops.max_tokens_per_item == 5 * 256
    qwen = _vision("Qwen--Qwen3-VL-8B-Instruct")
    assert image_tokens(qwen, 1024, 1024, {}) == 32 * 32


def test_skip_mm_profiling_reserves_nothing_and_says_so():
    vision = _vision("Qwen--Qwen3-VL-8B-Instruct")
    lines, notes = encoder_lines(vision, EncoderSpec(skip_profiling=True), 10**9)
    assert lines == () and any("--skip-mm-profiling" in n for n in notes)


@pytest.mark.parametrize(("enc", "needle"), [
    (dict(limits=(("audio", 1), ("sound", 1))), "this model takes image, video"),
    (dict(processor_kwargs=(("max_pixels", -3),)), "a whole number >= 1"),
    (dict(processor_kwargs=(("do_pan_and_scan", True),)), "one of max_pixels"),
    (dict(tp_mode="pipeline"), "weights or data"),
])
def test_bad_knobs_are_one_line_errors(enc, needle):
    with pytest.raises(SpecError) as error:
        encoder_budget(_vision("Qwen--Qwen3-VL-8B-Instruct"), EncoderSpec(**enc))
    assert needle in str(error.value) and "\n" not in str(error.value)


@given(batched=st.integers(1, 200_000), seqs=st.integers(1, 2048),
       length=st.integers(1, 300_000), pixels=st.integers(3136, 50_000_000))
def test_budget_rules_hold(batched, seqs, length, pixels):
    """vLLM's invariants: the budget covers one largest item and the batch; the items fit it."""
    vision = _vision("Qwen--Qwen3-VL-8B-Instruct")
    found = encoder_budget(vision, EncoderSpec(
        max_num_batched_tokens=batched, max_num_seqs=seqs, max_model_len=length,
        processor_kwargs=(("max_pixels", pixels),)))
    assert found.budget_tokens == max(batched, found.max_tokens_per_item)
    assert 1 <= found.items and found.held_tokens <= found.budget_tokens
    assert found.cache_bytes == found.held_tokens * vision.out_width * 2


def test_llama4_profiles_seventeen_tiles_an_image():
    """No vLLM log of a Llama-4 encoder budget was found; vLLM's rule by hand (mllama4.py at
    v0.33.0 lines 565-585 and 635, the same at v0.19.0 lines 562-578 and 632):
    get_image_size_with_most_features is 336 px wide x max_patches (16, config.json's
    image_processor_config) tiles tall, so the image is 16 tiles and the global one;
    get_patch_per_chunk = (336 // 14)^2 // round(1 / 0.5^2) = 576 // 4 = 144 embeddings a tile:
    17 x 144 = 2,448 tokens. At 8,192 batched tokens: min(8192 // 2448, ...) = 3 images, each
    5,120 wide (the projector into text hidden_size) in bf16."""
    for name in ("meta-llama--Llama-4-Scout-17B-16E-Instruct",
                 "meta-llama--Llama-4-Maverick-17B-128E-Instruct"):
        found = encoder_budget(_vision(name), EncoderSpec(max_num_batched_tokens=8192))
        assert (found.modality, found.max_tokens_per_item) == ("image", 17 * 144)
        assert (found.budget_tokens, found.items) == (8192, 3)
        assert found.cache_bytes == 3 * 2448 * 5120 * 2
    one = encoder_budget(_vision("meta-llama--Llama-4-Scout-17B-16E-Instruct"),
                         EncoderSpec(processor_kwargs=(("max_patches", 1),)))
    assert one.max_tokens_per_item == 144  # a single tile has no global tile


def test_internvl_tiles_thumbnail_and_video_frames():
    """No vLLM log of an InternVL encoder budget was found; vLLM's rule by hand (internvl.py at
    v0.33.0 line 374, image_seq_length = int((448 // 14)^2 x 0.5^2) = 256;
    transformers_utils/processors/internvl.py lines 80 and 125: max_dynamic_patch 12 tiles and a
    thumbnail = 13 x 256 = 3,328; the same at v0.19.0 lines 372, 75, 120). A Qwen2 language
    model takes videos, one tile a frame, as many as max_model_len leaves beside one image
    (get_num_frames_with_most_features, line 393): (32768 - 3328) // 256 = 115 frames."""
    vision = _vision("OpenGVLab--InternVL3-1B")
    image = encoder_budget(vision, EncoderSpec(limits=(("video", 0),)))
    assert (image.max_tokens_per_item, image.items) == (13 * 256, 2)
    assert image.cache_bytes == 2 * 3328 * 896 * 2
    video = encoder_budget(vision, EncoderSpec(max_model_len=32768))
    assert (video.modality, video.max_tokens_per_item, video.items) == ("video", 115 * 256, 1)
    assert video.budget_tokens == 115 * 256
    no_image = encoder_budget(vision, EncoderSpec(max_model_len=32768, limits=(("image", 0),)))
    assert no_image.max_tokens_per_item == 128 * 256  # mm_counts image 0: the whole length
    assert image_tokens(vision, 448, 448, {}) == 256  # one tile, no thumbnail
    assert image_tokens(vision, 896, 448, {}) == 3 * 256  # 2 x 1 grid and the thumbnail
    off = encoder_budget(vision, EncoderSpec(limits=(("video", 0),), processor_kwargs=(
        ("dynamic_image_size", False),)))
    assert off.max_tokens_per_item == 256


def test_glm4v_image_tokens_match_vllms_stated_figures():
    """vLLM #34483 (tests/fixtures/encoder/glm_pr34483.txt) states GLM-OCR's figures under the
    processor rule GLM-4.5V shares (glm4_1v.py, two-frame smart_resize inside longest_edge
    9,633,792): a 2968x1596 image is 6,042 tokens, the largest ~6,084 (78 x 78 merged)."""
    stated = dict(line.rsplit(" tokens ", 1) for line in
                  (LOGS / "glm_pr34483.txt").read_text().splitlines()
                  if not line.startswith("#"))
    vision = _raw_vision("zai-org--GLM-4.5V")
    assert image_tokens(vision, 2968, 1596, {}) == int(stated["image 2968x1596"])
    found = encoder_budget(vision, EncoderSpec(limits=(("video", 0),)))
    assert found.max_tokens_per_item == int(stated["largest single image"])
    assert (found.budget_tokens, found.items) == (8192, 1)
    assert found.cache_bytes == 6084 * 4096 * 2
    with pytest.raises(SpecError) as error:
        encoder_budget(vision, EncoderSpec())
    assert '{"video": 0}' in str(error.value) and "\n" not in str(error.value)


@given(width=st.integers(28, 20_000), height=st.integers(28, 20_000),
       tiles=st.integers(1, 40), thumbnail=st.booleans())
def test_no_image_exceeds_the_profiled_maximum(width, height, tiles, thumbnail):
    """vLLM sizes the budget by the largest item: any one InternVL image's tokens (tile grid
    and thumbnail) fit it, for any size and tile setting. GLM's maximum is vLLM's square dummy
    (6,084); a non-square image fills the pixel bound closer (1975 x 11850 is 6,144 tokens), so
    GLM's images are bounded by longest_edge / 2 / 28^2 = 6,144 instead."""
    if max(width, height) / min(width, height) > 200:  # GLM's processor refuses such images
        return
    internvl = _vision("OpenGVLab--InternVL3-1B")
    kwargs = {"max_dynamic_patch": tiles, "use_thumbnail": thumbnail}
    most = encoder_budget(internvl, EncoderSpec(limits=(("video", 0),),
                                                processor_kwargs=tuple(kwargs.items())))
    assert 256 <= image_tokens(internvl, width, height, kwargs) <= most.max_tokens_per_item
    glm = _raw_vision("zai-org--GLM-4.5V")
    assert 1 <= image_tokens(glm, width, height, {}) <= 9_633_792 // 2 // 28 ** 2
    assert image_tokens(glm, 1975, 11850, {}) == 6144 > 6084


def test_internvl_kwargs_are_checked_even_with_dynamic_tiles_off():
    vision = _vision("OpenGVLab--InternVL3-1B")
    kwargs = {"dynamic_image_size": False, "min_dynamic_patch": "two"}
    assert image_tokens(vision, 896, 448, kwargs) == 256
    with pytest.raises(SpecError) as error:
        image_tokens(vision, 896, 448, {"dynamic_image_size": "yes"})
    assert "dynamic_image_size" in str(error.value)
    with pytest.raises(SpecError):
        encoder_budget(vision, EncoderSpec(processor_kwargs=(("min_dynamic_patch", 13),)))


def test_vllm_0_11_profiles_qwen3_video_with_timestamps_and_pads_to_the_budget():
    """v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed (vLLM 0.11.0, max_model_len 65,536, 2,048 batched
    tokens) logs 'a budget of 153600 tokens, and profiled with 1 video items': 24,576 frames
    (the cap) of 32 px after the video smart_resize are 12,288 soft tokens, x 12.5 with their
    timestamps (qwen3_vl.py get_max_video_tokens at v0.11.0); profile_run pads the output to
    the budget (gpu_model_runner.py at v0.11.0), so the cache is 153,600 rows x 2,048 x 4."""
    vision = _vision("Qwen--Qwen3-VL-30B-A3B-Instruct")
    budget, items, modality = _logged("../vllm_logs/v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed.log")
    enc = EncoderSpec(max_num_batched_tokens=2048, max_model_len=65536,
                      rows_to_budget=True, qwen3_video_timestamps=True)
    found = encoder_budget(vision, enc)
    assert (found.budget_tokens, found.items, found.modality) == (budget, items, modality)
    assert found.max_tokens_by_modality == {"image": 16384, "video": 153600}
    assert found.cache_bytes == 153600 * 2048 * 4 * 2
    # the same knobs under the v0.33.0 rule: a 16,384-token image, held as it is
    newest = encoder_budget(vision, EncoderSpec(max_num_batched_tokens=2048, max_model_len=65536))
    assert (newest.modality, newest.cache_bytes) == ("image", 16384 * 2048 * 4 * 2)


def test_vllm_0_11_pads_every_profiled_item_to_the_whole_budget():
    """0.11.x pads each of the items to encoder_budget rows (output.new_zeros((encoder_budget,
    hidden))); 0.12.0 pads to the largest item (the rule before and after: the item itself)."""
    vision = _vision("Qwen--Qwen3-VL-8B-Instruct")
    kwargs = (("max_pixels", 1024 * 32 * 32),)  # 1,024-token images
    plain = encoder_budget(vision, EncoderSpec(max_num_batched_tokens=8192,
                                               processor_kwargs=kwargs, limits=(("video", 0),)))
    padded = encoder_budget(vision, EncoderSpec(max_num_batched_tokens=8192, rows_to_budget=True,
                                                processor_kwargs=kwargs, limits=(("video", 0),)))
    assert (plain.items, plain.max_tokens_per_item, plain.budget_tokens) == (8, 1024, 8192)
    assert padded.cache_bytes == plain.cache_bytes * 8 == 8 * 8192 * vision.out_width * 2


@given(st.integers(min_value=1, max_value=300_000))
def test_qwen3_video_with_timestamps_never_fits_more_frames_than_the_cap(length):
    vision = _vision("Qwen--Qwen3-VL-8B-Instruct")
    found = encoder_budget(vision, EncoderSpec(max_model_len=length, limits=(("image", 0),),
                                               qwen3_video_timestamps=True))
    tokens = found.max_tokens_per_item
    assert tokens % 25 in (0, 12)  # soft tokens x 12.5, truncated
    assert tokens <= int(12288 * 12.5)  # at most longest_edge / 2 frames / 32^2 soft tokens


def test_vllm_0_11_qwen3_vl_8b_at_32k_logs_the_same_video_budget():
    """vllm-project/vllm#27992 (2025-11-03, 'Encoder cache should not be greater than max model
    len'): `vllm serve Qwen/Qwen3-VL-8B-Instruct-FP8 --max-model-len 32768` on 0.11.0
    (gpu_model_runner.py:3344) logs 'a budget of 153600 tokens, and profiled with 1 video items':
    at 32,768 the frames still reach the 24,576 cap (a frame pair of 32 px is one soft token)."""
    vision = _vision("Qwen--Qwen3-VL-8B-Instruct")
    found = encoder_budget(vision, EncoderSpec(max_num_batched_tokens=8192, max_model_len=32768,
                                               rows_to_budget=True, qwen3_video_timestamps=True))
    assert (found.budget_tokens, found.items, found.modality) == (153600, 1, "video")
    assert found.cache_bytes == 153600 * 4096 * 4 * 2  # 4.69 GiB held through the profile
