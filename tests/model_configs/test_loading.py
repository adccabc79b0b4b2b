"""Loading config.json files and model directories offline; safetensors headers give exact bytes."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.model_configs import bundled_models, load_model
from servecap.model_configs.safetensors_headers import is_metadata

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100, "torch_dtype": "bfloat16",
        "max_position_embeddings": 256, "rope_theta": 10000.0, "bos_token_id": 1}


def test_every_bundled_model_loads() -> None:
    for path in bundled_models():
        spec = load_model(str(path)).spec
        assert spec.num_layers > 0 and spec.source


def test_config_json_ignores_unrelated_keys_and_derives_head_dim_with_a_note(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    spec = load_model(str(path)).spec
    assert spec.attention.head_dim == 16
    assert any("head_dim not stated" in note for note in spec.notes)


def test_stated_head_dim_is_taken_as_given(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "head_dim": 32}))
    assert load_model(str(path)).spec.attention.head_dim == 32


def test_model_directory_weights_come_from_safetensors_headers(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    save_file({"model.embed_tokens.weight": np.zeros((100, 64), np.float16),
               "model.layers.0.mlp.down_proj.qweight": np.zeros((16, 64), np.int32),
               "model.layers.0.mlp.down_proj.scales": np.zeros((1, 64), np.float16),
               "model.layers.0.mlp.down_proj.qzeros": np.zeros((1, 8), np.int32)},
              str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"lm_head.weight": np.zeros((100, 64), np.float16)},
              str(tmp_path / "model-00002-of-00002.safetensors"))
    loaded = load_model(str(tmp_path))
    found = loaded.file_weights
    assert found.param_bytes == 100 * 64 * 2 * 2 + 16 * 64 * 4
    assert found.metadata_bytes == 64 * 2 + 8 * 4
    assert (found.num_tensors, found.num_files) == (5, 2)


def test_index_total_size_is_used_when_shards_are_absent(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 123456}, "weight_map": {}}))
    assert load_model(str(tmp_path)).file_weights.param_bytes == 123456


def test_plan_cli_uses_directory_bytes_and_says_so(tmp_path) -> None:
    from typer.testing import CliRunner

    from servecap.cli.app import app

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    save_file({"w": np.zeros((10, 10), np.float32)}, str(tmp_path / "model.safetensors"))
    result = CliRunner().invoke(app, ["plan", str(tmp_path), "--device", "1GiB", "--json"])
    data = json.loads(result.stdout)
    assert data["weights_bytes"] == 400
    assert data["lines"][0]["measured"] and "safetensors" in data["lines"][0]["from"]


def test_corrupt_safetensors_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(SpecError, match="safetensors"):
        load_model(str(tmp_path))


def test_metadata_names() -> None:
    assert is_metadata("model.layers.0.mlp.experts.gate_up_proj_scales")
    assert is_metadata("x.weight_scale_inv") and is_metadata("x.qzeros")
    assert not is_metadata("x.weight") and not is_metadata("x.qweight")


def test_planned_tiny_model_matches_its_own_bf16_tensors(tmp_path) -> None:
    """The architecture inventory and the safetensors bytes agree for a complete checkpoint."""
    shapes = {"model.embed_tokens.weight": (100, 64), "lm_head.weight": (100, 64),
              "model.norm.weight": (64,)}
    for i in range(2):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (64, 64), p + "self_attn.k_proj.weight":
                       (32, 64), p + "self_attn.v_proj.weight": (32, 64),
                       p + "self_attn.o_proj.weight": (64, 64), p + "mlp.gate_proj.weight":
                       (128, 64), p + "mlp.up_proj.weight": (128, 64),
                       p + "mlp.down_proj.weight": (64, 128), p + "input_layernorm.weight": (64,),
                       p + "post_attention_layernorm.weight": (64,)})
    save_file({k: np.zeros(v, np.float16) for k, v in shapes.items()},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    loaded = load_model(str(tmp_path))
    plan = build_plan(loaded.spec, ServeSpec(device_bytes=2**30, context_tokens=16,
                                             concurrency=1, runtime_peak_bytes=0))
    assert plan.line("weights") == loaded.file_weights.param_bytes


LOOKUP = """
import json, sys
from servecap.model_configs import load_model
serving = load_model(sys.argv[1]).serving
loader = sys.modules.get("pydantic.plugin._loader")
looked_up = loader is not None and loader._plugins is not None
from servecap.model_configs.schema import Serving
print(json.dumps([[getattr(serving, f) for f in Serving.model_fields],
                  [None] * len(Serving.model_fields), looked_up]))
"""


@pytest.mark.parametrize("name", ["llama-3.1-8b", "config.json"])
def test_a_file_without_serving_defaults_looks_up_no_pydantic_plugins(name, tmp_path) -> None:
    """A model without deployment defaults reads Serving's all-None defaults, without building
    Serving's validator: building one outside the
    loader's no-plugins scope scans every installed package's entry points (a sixth of a
    bundled model's plan start-up)."""
    import subprocess
    import sys

    ref = name
    if name == "config.json":
        ref = str(tmp_path / "config.json")
        (tmp_path / "config.json").write_text(json.dumps(TINY))
    out = subprocess.run([sys.executable, "-c", LOOKUP, ref], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    read, defaults, looked_up = json.loads(out.stdout)
    assert read == defaults
    assert looked_up is False


def _typed(value):
    """A value with its type: 32 and 32.0 compare equal, but print differently."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    return (type(value).__name__, value)


def _read(model, schema) -> dict:
    """Each of schema's fields as `model` reads it, typed; Serving's too."""
    from servecap.model_configs.schema import Serving

    return {name: _read(getattr(model, name), Serving) if name == "serving" and
            getattr(model, name) is not None else _typed(getattr(model, name))
            for name in schema.model_fields}


@pytest.mark.parametrize("path", bundled_models(), ids=lambda p: p.stem)
def test_a_bundled_model_is_built_as_its_validation_would_build_it(path, tmp_path) -> None:
    """Bundled YAMLs load without ModelFile's validator or pydantic (a start-up cost); each
    must be one the validator accepts, every field read as the same value of the same type
    (a float field written as a whole number would read as an int)."""
    from servecap.model_configs.loader import _bundled
    from servecap.model_configs.reading import parse_yaml
    from servecap.model_configs.schema import ModelFile

    data = parse_yaml(path.read_text())
    assert _read(_bundled(data), ModelFile) == _read(ModelFile.model_validate(data), ModelFile)
    copy = tmp_path / path.name  # outside the bundled directory: validated
    copy.write_text(path.read_text())
    assert load_model(path.stem).spec == load_model(str(copy)).spec
