"""modelopt checkpoints: each module's bytes from the format it is stored in (hf_quant_config.json
or config.json's quantization_config, exclude lists, MIXED_PRECISION's per-layer algos),
checked against real configs and against safetensors files written in modelopt's layout."""

import json
from pathlib import Path

import pytest
from checkpoint_files import dense, fp8_tensor, llama_tensors, nvfp4, write_safetensors

from servecap.ledger.errors import SpecError
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model
from servecap.model_configs.quant import parse_quantization

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 320, "torch_dtype": "bfloat16",
        "max_position_embeddings": 1024, "tie_word_embeddings": False}


def shares(name: str) -> dict:
    spec = load_model(str(CONFIGS / name / "config.json")).spec
    return {s.name: s for s in weight_bytes(spec, 16, spec.quant).by_format}


def test_gemma4_31b_nvfp4_keeps_attention_bf16_beside_fp4_mlps() -> None:
    """The silently wrong number: 17.5 GB of weights planned for 30.2 GB, every self_attn
    excluded by name in exclude_modules but quantized in the plan."""
    got = shares("nvidia--Gemma-4-31B-IT-NVFP4")
    mlp = 60 * 3 * 21504 * 5376
    sliding = (32 * 256 * 5376 + 2 * 16 * 256 * 5376 + 5376 * 32 * 256) * 50
    full = (32 * 512 * 5376 + 4 * 512 * 5376 + 5376 * 32 * 512) * 10  # K doubles as V
    assert got["nvfp4"].num_parameters == mlp
    assert got["nvfp4"].value_bytes == mlp // 2
    assert got["nvfp4"].metadata_bytes == mlp // 16 + 60 * 3 * 8  # e4m3 per 16, 2 fp32 each
    embed = 262144 * 5376
    assert 0 < got["bf16"].num_parameters - sliding - full - embed < 2e6  # norms, scalars
    total = got["nvfp4"].value_bytes + got["bf16"].value_bytes
    assert abs(total - 30.2e9) < 0.01 * 30.2e9


def test_qwen36_27b_mixed_precision_stores_each_layer_in_its_listed_algo() -> None:
    cfg = json.loads((CONFIGS / "nvidia--Qwen3.6-27B-NVFP4" / "config.json").read_text())
    text = cfg["text_config"]
    h, inter = text["hidden_size"], text["intermediate_size"]
    hk, hv = text["linear_num_key_heads"], text["linear_num_value_heads"]
    dk, dv = text["linear_key_head_dim"], text["linear_value_head_dim"]
    heads, kv, d = text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]
    gdn = 48 * ((2 * hk * dk + hv * dv) * h + hv * dv * h + h * hv * dv)  # qkv, z, out_proj
    attn = 16 * (2 * heads * d * h + 2 * kv * d * h + h * heads * d)  # q (gated), k, v, o
    got = shares("nvidia--Qwen3.6-27B-NVFP4")
    assert got["fp8"].num_parameters == gdn + attn
    assert got["nvfp4 (w4a16)"].num_parameters == 64 * 3 * inter * h + text["vocab_size"] * h
    assert got["fp8"].metadata_bytes == (48 * 3 + 16 * 4) * 8  # weight + input scale each


def _directory(tmp_path: Path, quant: dict, tensors: dict, in_config: bool) -> Path:
    cfg = dict(TINY)
    if in_config:
        cfg["quantization_config"] = quant
    else:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    write_safetensors(tmp_path / "model.safetensors", tensors)
    return tmp_path


def _formula_and_headers(directory: Path) -> tuple[int, int]:
    loaded = load_model(str(directory))
    got = weight_bytes(loaded.spec, 16, loaded.spec.quant)
    found = loaded.file_weights
    return got.param_bytes + got.metadata_bytes, found.param_bytes + found.metadata_bytes


@pytest.mark.parametrize("in_config", [False, True])
def test_nvfp4_bytes_from_the_config_equal_the_checkpoint_written_in_modelopt_layout(
        tmp_path, in_config: bool) -> None:
    """hf_quant_config.json's exclude_modules (modelopt <= 0.29) and config.json's ignore
    (>= 0.31) name the same modules; each bf16, the rest NVFP4 as modelopt writes it."""
    excluded = ["lm_head", "model.layers.*.self_attn*"]
    quant = ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
              "ignore": excluded} if in_config else
             {"producer": {"name": "modelopt"}, "quantization": {
                 "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                 "exclude_modules": excluded}})

    def linear(name, rows, cols):
        return dense(name, rows, cols) if "self_attn" in name or name == "lm_head" else \
            nvfp4(name, rows, cols)

    directory = _directory(tmp_path, quant, llama_tensors(TINY, linear), in_config)
    formula, headers = _formula_and_headers(directory)
    assert formula == headers


def test_mixed_precision_bytes_equal_the_checkpoint(tmp_path) -> None:
    layers = {}
    for n in range(3):
        for leaf in ("q_proj", "k_proj", "v_proj", "o_proj"):
            layers[f"model.layers.{n}.self_attn.{leaf}"] = {"quant_algo": "FP8"}
        for leaf in ("gate_proj", "up_proj", "down_proj"):
            layers[f"model.layers.{n}.mlp.{leaf}"] = {"quant_algo": "W4A16_NVFP4",
                                                      "group_size": 16}
    layers["lm_head"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
             "quantized_layers": layers, "ignore": ["mtp*"]}

    def linear(name, rows, cols):
        if "self_attn" in name:
            return fp8_tensor(name, rows, cols)
        return nvfp4(name, rows, cols, w4a4=False)

    directory = _directory(tmp_path, quant, llama_tensors(TINY, linear), True)
    formula, headers = _formula_and_headers(directory)
    assert formula == headers


@pytest.mark.parametrize(("quant", "field"), [
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "quantization_config.quant_algo"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"},
     "quantization_config.quantized_layers"),
    ({"quantization": {"quant_algo": "FP8", "exclude_modules": "lm_head"}},
     "hf_quant_config.json quantization.exclude_modules"),
])
def test_a_modelopt_config_it_cannot_store_is_refused_by_name(quant, field) -> None:
    with pytest.raises(SpecError) as err:
        parse_quantization(quant)
    assert err.value.field == field


def test_a_broken_hf_quant_config_names_the_file(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quant_algo": "FP8"}))
    with pytest.raises(SpecError) as err:
        load_model(str(tmp_path / "config.json"))
    assert "hf_quant_config.json" in err.value.line()
