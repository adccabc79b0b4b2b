"""Buffers vLLM's model classes allocate with the weights (ledger/vllm_buffers.py): M-RoPE's
enlarged rotary cache and Qwen3-VL's deepstack input buffers, checked against the release
sources' arithmetic and against the 4 x RTX 3090 Qwen3-VL log's 'Model loading took'."""

import importlib.util
from dataclasses import replace
from pathlib import Path

from servecap.ledger.engines import rotary_cache_line
from servecap.ledger.vllm_buffers import deepstack_bytes, rotary_positions
from servecap.ledger.vllm_versions import row
from servecap.model_configs import load_model

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
_spec = importlib.util.spec_from_file_location("vllm_logs", ROOT / "bench" / "vllm_logs.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _model(name: str):
    return load_model(str(CONFIGS / name / "config.json")).spec


def test_qwen3_vl_is_read_as_m_rope_and_qwen3_moe_is_not():
    assert _model("Qwen--Qwen3-VL-30B-A3B-Instruct").mrope
    assert _model("Qwen--Qwen2.5-VL-7B-Instruct").mrope  # rope_scaling.mrope_section
    assert not _model("Qwen--Qwen3-30B-A3B").mrope


def test_m_rope_cache_is_four_times_the_positions_from_0_8_to_0_28():
    """MRotaryEmbedding: cache_max_position_num = max_position_embeddings x 4 (v0.8.0 to
    v0.28.0); 262,144 x 4 x 128 x 2 B = 256 MiB for Qwen3-VL, what vllm#44738 frees."""
    spec = _model("Qwen--Qwen3-VL-30B-A3B-Instruct")
    for version in ("0.8.0", "0.11.0", "0.19.0", "0.28.0"):
        assert rotary_positions(spec, row(version))[0] == 262_144 * 4, version
    assert rotary_cache_line(spec, row("0.11.0")).num_bytes == 256 * 2**20
    assert rotary_positions(spec, row("0.7.1"))[0] == 262_144  # no factor yet
    assert rotary_positions(spec, row("0.33.0"))[0] == 262_144  # Qwen3-VL passes factor 1
    qwen25 = _model("Qwen--Qwen2.5-VL-7B-Instruct")
    assert rotary_positions(qwen25, row("0.33.0"))[0] == qwen25.max_position_embeddings * 4
    plain = _model("Qwen--Qwen3-30B-A3B")
    assert rotary_positions(plain, row("0.11.0"))[0] == plain.max_position_embeddings


def test_deepstack_buffers_are_levels_x_batched_tokens_x_hidden():
    spec = _model("Qwen--Qwen3-VL-30B-A3B-Instruct")
    assert deepstack_bytes(spec, row("0.11.0"), 2048, 2)[0] == 3 * 2048 * 2048 * 2
    assert deepstack_bytes(spec, row("0.10.2"), 2048, 2)[0] == 0  # before Qwen3-VL
    assert deepstack_bytes(replace(spec, encoder=None), row("0.11.0"), 2048, 2)[0] == 0


def test_the_3090_log_loads_what_the_plan_counts():
    """Each rank logs 'Model loading took 14.7708 GiB': the text decoder, the vision tower, the
    M-RoPE cache and the deepstack buffers land within 0.1% (-1.5% without the last two)."""
    case = next(c for c in bench.cases() if c.name == "v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed")
    outcome = bench.evaluate(case)
    assert abs(outcome.weights_error) < 0.001


def test_a_partial_rotary_head_caches_only_its_rotated_dims():
    """Qwen3.6 rotates 64 of its 256 head dims (partial_rotary_factor 0.25 in rope_parameters),
    so get_rope's cache is positions x 64: x 4 positions at 0.22, x 1 at 0.33."""
    spec = _model("Qwen--Qwen3.6-35B-A3B")
    assert spec.attention.rotary_dim == 64 and spec.mrope
    assert rotary_cache_line(spec, row("0.22.0")).num_bytes == 262_144 * 4 * 64 * 2
    assert rotary_cache_line(spec, row("0.33.0")).num_bytes == 262_144 * 64 * 2


def test_vllm_profile_holds_its_dummy_pixels_beside_the_cache():
    """profile_run keeps batched_dummy_mm_inputs alive through the decoder's dummy run: the
    items' pixel values in the model dtype (3 x 2 x 16 x 16 values a Qwen3-VL patch); other
    engines' plans hold none. At 0.11.x the last unpadded output is held too."""
    from servecap.ledger.encoder import EncoderSpec, encoder_budget

    vision = load_model(str(CONFIGS / "Qwen--Qwen3-VL-8B-Instruct" / "config.json")).spec.vision
    enc = EncoderSpec(max_num_batched_tokens=8192)
    plain = encoder_budget(vision, enc)
    held = encoder_budget(vision, replace(enc, holds_inputs=True))
    patches = plain.max_tokens_per_item * 4  # merged 2 x 2
    assert plain.held_bytes == 0
    assert held.held_bytes == held.items * patches * 1536 * 2
    wide = replace(enc, max_num_batched_tokens=32768, holds_inputs=True)  # budget > an item
    padded = encoder_budget(vision, replace(wide, rows_to_budget=True))
    assert padded.held_bytes == encoder_budget(vision, wide).held_bytes + \
        plain.max_tokens_per_item * 4096 * 4 * 2
