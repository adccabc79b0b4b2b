"""The families read by their vLLM model class (model_configs/families.py, v0.21.0): DeciLM's
per-block shapes, Gemma-4's KV sharing and per-layer embeddings, EXAONE-4's string pattern,
VL text decoders as their text architecture, and the errors that name the field."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.arch import count_parameters
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import kv_bytes_per_token
from servecap.model_configs import load_model

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
BF16 = 16


def fixture(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


def write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_exaone4_string_pattern_expands_as_layer_types_do(tmp_path: Path) -> None:
    """'LLLG': three sliding layers, then a global one (Exaone4Config), the same as its
    layer_types; before, 'LLLG' was refused as "should be a valid integer"."""
    data = fixture("LGAI-EXAONE--EXAONE-4.0-32B")
    stated = load_model(write(tmp_path, data)).spec.attention.layer_kinds
    del data["layer_types"]
    from_pattern = load_model(write(tmp_path, data)).spec.attention.layer_kinds
    assert from_pattern == stated and stated[:4] == ("sliding",) * 3 + ("full",)


@pytest.mark.parametrize("bad", ["LLXG", "", 3.5, 0])
def test_a_bad_pattern_names_both_forms_never_one_type(tmp_path: Path, bad) -> None:
    data = {**fixture("LGAI-EXAONE--EXAONE-4.0-32B"), "sliding_window_pattern": bad}
    del data["layer_types"]
    with pytest.raises(SpecError) as err:
        load_model(write(tmp_path, data))
    text = str(err.value)
    assert "sliding_window_pattern" in text and "'LLLG'" in text and "valid integer" not in text


def test_gemma4_e2b_shares_kv_in_its_last_20_layers_and_counts_its_ple_tables() -> None:
    spec = load_model(str(CONFIGS / "google--gemma-4-E2B-it" / "config.json")).spec
    shapes = spec.layer_shapes
    assert [s.kv_source is not None for s in shapes] == [i >= 15 for i in range(35)]
    assert {s.kv_source for s in shapes[15:]} == {13, 14}  # last sliding, last full
    assert [s.intermediate for s in shapes] == [6144] * 15 + [12288] * 20  # double-wide
    # 12 sliding (1 x (256 + 256)) and 3 full (1 x (512 + 512)) layers cache, in bf16
    assert kv_bytes_per_token(spec, BF16) == (12 * 512 + 3 * 1024) * 2
    without = replace(spec, per_layer_input=None)
    ple = 262144 * 35 * 256 + 35 * 256 * 1536 + 256 + 35 * (2 * 256 * 1536 + 1536)
    assert count_parameters(spec) - count_parameters(without) == ple


def deci(blocks: list[tuple[int | None, float | None]], heads: int = 8, hidden: int = 512):
    """A DeciLM config: (n_heads_in_group or None for no-op, ffn_mult or None) per block."""
    return {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas",
            "hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": len(blocks),
            "vocab_size": 1000, "torch_dtype": "bfloat16", "intermediate_size": None,
            "num_key_value_heads": None, "tie_word_embeddings": False,
            "block_configs": [{"attention": {"n_heads_in_group": g, "no_op": g is None},
                               "ffn": {"ffn_mult": m, "no_op": m is None}} for g, m in blocks]}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, 1, 2, 4, 8]),
                          st.sampled_from([None, 0.5, 1.0, 1.3125, 2.625, 5.25])),
                min_size=1, max_size=12))
def test_deci_blocks_plan_each_layers_own_kv_and_width(tmp_path_factory, blocks) -> None:
    """KV: 2 x (heads / n_heads_in_group) x head_dim per attention block, none for a no-op;
    parameters: the block formula of nemotron_nas.py (widths the multiple of 256 at or above
    int(2 x ffn_mult x hidden / 3))."""
    path = write(tmp_path_factory.mktemp("deci"), deci(blocks))
    spec = load_model(path).spec
    dim = 512 // 8
    assert kv_bytes_per_token(spec, BF16) == sum(2 * (8 // g) * dim * 2 for g, _ in blocks if g)
    total = 2 * 1000 * 512 + 512
    for g, m in blocks:
        total += (2 * 512 * 512 + 2 * (8 // g) * dim * 512 + 512) if g else 0
        total += (3 * (-(-int(2 * m * 512 / 3) // 256) * 256) * 512 + 512) if m else 0
    assert count_parameters(spec) == total


@pytest.mark.parametrize(("change", "field"), [
    ({"replace_with_linear": True}, "replace_with_linear"),
    ({"n_heads_in_group": 3}, "n_heads_in_group"),
])
def test_a_deci_block_vllm_cannot_build_is_refused_by_field(tmp_path: Path, change, field):
    data = deci([(2, 1.0), (2, 1.0)])
    data["block_configs"][1]["attention"].update(change)
    with pytest.raises(SpecError, match=f"block_configs\\[1\\].attention.{field}"):
        load_model(write(tmp_path, data))


def test_qwen3_vl_moe_text_plans_as_the_qwen3_moe_it_is(tmp_path: Path) -> None:
    data = fixture("Qwen--Qwen3-VL-30B-A3B-Instruct")
    vl = load_model(str(CONFIGS / "Qwen--Qwen3-VL-30B-A3B-Instruct" / "config.json")).spec
    text = {**data["text_config"], "model_type": "qwen3_moe",
            "architectures": ["Qwen3MoeForCausalLM"], "tie_word_embeddings": False}
    plain = load_model(write(tmp_path, text)).spec
    same = {"name": "", "source": "", "notes": (), "architecture": "",  # what says where from
            "vision": None,  # the vision tower, read apart for the encoder budget
            "encoder": None,  # and for its weights
            "mrope": False}  # the class's M-RoPE positions (its rotary cache)
    assert replace(vl, **same) == replace(plain, **same)
    assert vl.mrope and not plain.mrope
    assert vl.vision.family == "qwen_vl" and plain.vision is None
    assert vl.encoder.kind == "qwen3_vision" and plain.encoder is None


def test_v_head_dim_on_a_class_that_builds_v_at_head_dim_is_refused(tmp_path: Path) -> None:
    data = {**fixture("mistralai--Mistral-7B-Instruct-v0.3"), "v_head_dim": 64}
    with pytest.raises(SpecError, match="v_head_dim"):
        load_model(write(tmp_path, data))


@pytest.mark.parametrize("name", ["Qwen--Qwen2.5-VL-7B-Instruct", "mistralai--Voxtral-Mini-3B-2507",
                                  "google--gemma-4-E2B-it"])
def test_a_multimodal_model_says_its_encoders_are_not_counted(name: str) -> None:
    notes = load_model(str(CONFIGS / name / "config.json")).spec.notes
    assert any(n.startswith("weights count the language model only") for n in notes)


def test_mimo_v2_caches_v_narrower_than_k() -> None:
    spec = load_model(str(CONFIGS / "XiaomiMiMo--MiMo-V2-Flash" / "config.json")).spec
    full = [s for s, k in zip(spec.layer_shapes, spec.attention.layer_kinds, strict=True)
            if k == "full"]
    assert len(full) == 9 and {(s.num_kv_heads, s.head_dim, s.v_head_dim) for s in full} == \
        {(4, 192, 128)}
    assert kv_bytes_per_token(spec, BF16) == 9 * 4 * 320 * 2 + 39 * 8 * 320 * 2


def test_gemma3n_shares_kv_as_its_vllm_class_fixes_it(tmp_path: Path) -> None:
    """Gemma3nAttention: the last num_kv_shared_layers layers read layer first - 1 (full) or
    first - 2 (sliding); AltUp, LAuReL and the per-layer embeddings are weights. From
    transformers' Gemma3nTextConfig defaults (Gemma-3n-E4B's text model: no official
    config.json of Gemma-3n was found to keep as a fixture), checked against its model class."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    transformers.logging.set_verbosity_error()
    made = transformers.AutoConfig.for_model("gemma3n_text")
    data = {**made.to_dict(), "torch_dtype": "bfloat16", "architectures": ["Gemma3nForCausalLM"]}
    spec = load_model(write(tmp_path, data)).spec
    kinds = spec.attention.layer_kinds
    sources = [s.kv_source for s in spec.layer_shapes]
    assert sources == [None] * 20 + [19 if k == "full" else 18 for k in kinds[20:]]
    assert kv_bytes_per_token(spec, BF16) == 20 * 2 * 2 * 256 * 2
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(made)
    state = model.state_dict()
    assert count_parameters(spec) == sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for key, b in model.named_buffers() if key in state)
