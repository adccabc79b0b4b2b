"""The decoder: what it builds or refuses, weight bytes equal to the ledger, safetensors."""

import json

import pytest
import torch
from safetensors.torch import save_file

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import GiB
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model
from servecap.runtime.model import Decoder, with_num_layers
from servecap.runtime.weights import load_decoder, random_decoder

BITS = {"fp32": 32, "bf16": 16, "fp16": 16}


def _serve(dtype: str) -> ServeSpec:
    return ServeSpec(device_bytes=80 * GiB, context_tokens=4096, concurrency=1,
                     weight_dtype=dtype, activation_dtype=dtype, runtime_peak_bytes=GiB)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_allocated_weight_bytes_equal_the_ledger(model_type: str, dtype: str, tiny_spec) -> None:
    spec = tiny_spec(model_type)
    model = random_decoder(spec, dtype)
    assert model.weight_bytes == weight_bytes(spec, BITS[dtype], None).param_bytes
    assert model.weight_bytes == build_plan(spec, _serve(dtype)).line("weights")


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-3.2-1b-instruct", "qwen2.5-7b",
                                  "qwen3-14b", "mistral-7b-v0.1", "mixtral-8x7b-v0.1",
                                  "qwen3-30b-a3b"])
def test_real_configs_allocate_the_ledger_weight_line(name: str) -> None:
    """Built on the meta device (no memory): parameter bytes equal the plan's weights line,
    tied embeddings counted once; a 2-layer copy scales exactly as its own plan does."""
    for spec in (load_model(name).spec, with_num_layers(load_model(name).spec, 2)):
        with torch.device("meta"):
            model = Decoder(spec).to(torch.bfloat16)
        assert model.weight_bytes == build_plan(spec, _serve("bf16")).line("weights")


@pytest.mark.parametrize("name,field", [("deepseek-v3", "quantization"), ("minimax-m2.5", "moe"),
                                        ("teaching-7b", "model"),
                                        ("gemma-2-9b-it", "model_type")])
def test_unsupported_architectures_are_refused(name: str, field: str) -> None:
    with pytest.raises(SpecError) as err:
        Decoder(load_model(name).spec)
    assert err.value.field == field


def test_num_layers_out_of_range_is_refused(tiny_spec) -> None:
    with pytest.raises(SpecError, match="between 1 and 2"):
        with_num_layers(tiny_spec(), 3)


def test_same_seed_same_weights(tiny_spec) -> None:
    a, b = random_decoder(tiny_spec(), "fp32", seed=3), random_decoder(tiny_spec(), "fp32", seed=3)
    assert torch.equal(a.model.layers[1].mlp.up_proj.weight, b.model.layers[1].mlp.up_proj.weight)


def _write_checkpoint(directory, model: Decoder, **config) -> None:
    spec = model.spec
    att = spec.attention
    (directory / "config.json").write_text(json.dumps({
        "model_type": spec.model_type, "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers, "num_attention_heads": att.num_heads,
        "num_key_value_heads": att.num_kv_heads, "head_dim": att.head_dim,
        "vocab_size": spec.vocab_size, "tie_word_embeddings": False, "torch_dtype": "float32",
        "rope_theta": 10000.0, "rms_norm_eps": 1e-6, **config}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(directory / "model.safetensors"))


def test_local_safetensors_directory_loads_the_same_model(tmp_path, tiny_spec,
                                                        dense_greedy) -> None:
    original = random_decoder(tiny_spec("qwen3"), "fp32", seed=7)
    _write_checkpoint(tmp_path, original)
    spec = load_model(str(tmp_path)).spec
    loaded = load_decoder(spec, tmp_path, "fp32")
    assert loaded.weight_bytes == original.weight_bytes
    assert dense_greedy(loaded, [1, 2, 3, 4], 6) == dense_greedy(original, [1, 2, 3, 4], 6)


def test_checkpoint_missing_a_tensor_or_with_rope_scaling_is_refused(tmp_path, tiny_spec) -> None:
    original = random_decoder(tiny_spec("qwen3"), "fp32")
    _write_checkpoint(tmp_path, original)
    state = {k: v for k, v in original.state_dict().items() if "q_norm" not in k}
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(SpecError, match="missing"):
        load_decoder(load_model(str(tmp_path)).spec, tmp_path, "fp32")
    _write_checkpoint(tmp_path, original, rope_scaling={"rope_type": "llama3", "factor": 8.0})
    with pytest.raises(SpecError, match="rope_scaling"):
        load_decoder(load_model(str(tmp_path)).spec, tmp_path, "fp32")


def test_checkpoint_without_config_or_with_a_wrong_shape_is_refused(tmp_path, tiny_spec) -> None:
    original = random_decoder(tiny_spec("qwen3"), "fp32")
    _write_checkpoint(tmp_path, original)
    spec = load_model(str(tmp_path)).spec
    state = {k: v.contiguous() for k, v in original.state_dict().items()}
    state["model.norm.weight"] = torch.ones(65)
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(SpecError, match=r"model.norm.weight has shape \(65,\)"):
        load_decoder(spec, tmp_path, "fp32")
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(SpecError, match="not a readable safetensors file"):
        load_decoder(spec, tmp_path, "fp32")
    (tmp_path / "config.json").unlink()
    with pytest.raises(SpecError, match="no config.json"):
        load_decoder(spec, tmp_path, "fp32")
