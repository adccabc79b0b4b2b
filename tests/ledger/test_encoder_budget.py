"""The encoder budget against vLLM's own startup lines ('Encoder cache will be initialized with
a budget of N tokens, and profiled with M <modality> items'), two families, and the rules'
properties."""

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servecap.ledger.encoder import EncoderSpec, encoder_budget, encoder_lines, image_tokens
from servecap.ledger.errors import SpecError
from servecap.model_configs import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "encoder"
LINE = re.compile(r"budget of (\d+) tokens, and profiled with (\d+) (\w+) items")


def _vision(name: str):
    return load_model(str(FIXTURES / "configs" / name / "config.json")).spec.vision


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
