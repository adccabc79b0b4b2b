"""Counts that cannot run away: the architecture's parameters and bytes checked against the
checkpoint's safetensors headers or index total_size and against the size the name states;
beyond 10 % a warning says so (a count read from headers is the one planned)."""

import json
from pathlib import Path

from checkpoint_files import dense, llama_tensors, write_safetensors

from servecap.model_configs import load_model

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
SUPER = CONFIGS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8" / "config.json"
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 320, "torch_dtype": "bfloat16",
        "max_position_embeddings": 1024, "tie_word_embeddings": False}


def warnings(loaded) -> list[str]:
    return [n for n in loaded.spec.notes if n.startswith("warning:")]


def test_a_latent_moe_counted_at_the_hidden_width_is_called_out(tmp_path) -> None:
    """Without moe_latent_size the experts are counted at 4,096 wide: 458.6e9 parameters
    under a name that states 120B and A12B."""
    cfg = json.loads(SUPER.read_text())
    del cfg["moe_latent_size"]
    home = tmp_path / "NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
    home.mkdir()
    (home / "config.json").write_text(json.dumps(cfg))
    found = warnings(load_model(str(home / "config.json")))
    assert len(found) == 1 and "120B / 12B its name states" in found[0]
    assert warnings(load_model(str(SUPER))) == []


def test_weights_off_from_the_index_total_size_warn_beyond_10_percent(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    index = tmp_path / "model.safetensors.index.json"
    for total, warned in ((1_000_000, True), (3_900_000, False)):
        index.write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": {}}))
        found = warnings(load_model(str(tmp_path)))
        assert bool(found) == warned
        assert not found or "index total_size" in found[0]


def test_parameters_are_counted_from_the_headers_and_a_gap_is_said(tmp_path) -> None:
    """A checkpoint holding more than the architecture (a tower, a draft layer): the headers'
    count is planned, and the 2 %+ gap is a note; beyond 10 % a warning."""
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    tensors = llama_tensors(TINY, dense) | dense("model.vision_tower.proj", 256, 512)
    write_safetensors(tmp_path / "model.safetensors", tensors)
    loaded = load_model(str(tmp_path))
    counted = sum(r * c for _, (_, shape) in tensors.items() for r, c in [(shape + (1,))[:2]])
    assert loaded.file_weights.parameters() == counted
    notes = [n for n in loaded.spec.notes if "parameters:" in n]
    assert len(notes) == 1 and f"{counted:,} in the safetensors headers" in notes[0]
