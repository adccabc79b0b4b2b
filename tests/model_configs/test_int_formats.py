"""compressed-tensors (w4a16, w8a8, nvfp4, 2:4 sparse, per-group schemes), auto-round and
bitsandbytes checkpoints: the bytes planned from config.json equal the bytes of a checkpoint
written in each format's layout (bitsandbytes within 0.1 %: its nested absmax and state blob)."""

import json

import pytest
from checkpoint_files import (
    bnb_nf4,
    ct_nvfp4,
    ct_sparse24_fp8,
    ct_w4a16,
    ct_w8a8_int8,
    dense,
    gptq,
    llama_tensors,
    write_safetensors,
)

from servecap.ledger.errors import SpecError
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model
from servecap.model_configs.quant import parse_quantization

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
        "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 320, "torch_dtype": "bfloat16",
        "max_position_embeddings": 1024, "tie_word_embeddings": False}


def group(weights: dict, targets=("Linear",), acts=None) -> dict:
    return {"targets": list(targets), "weights": weights, "input_activations": acts}


def ct(groups: dict, **more) -> dict:
    return {"quant_method": "compressed-tensors", "config_groups": groups, "ignore": ["lm_head"],
            **more}


W4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
FP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
INT8 = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
FP8 = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}


def except_head(store):
    return lambda name, rows, cols: dense(name, rows, cols) if name == "lm_head" else \
        store(name, rows, cols)


def attention_apart(attn, mlp):
    def store(name, rows, cols):
        if name == "lm_head":
            return dense(name, rows, cols)
        return (attn if "self_attn" in name else mlp)(name, rows, cols)
    return store


CASES = {
    "w4a16": (ct({"group_0": group(W4)}, format="pack-quantized"), except_head(ct_w4a16)),
    "w8a8-int8": (ct({"group_0": group(INT8, acts={"num_bits": 8, "type": "int",
                                                   "dynamic": True})}),
                  except_head(ct_w8a8_int8)),
    "nvfp4": (ct({"group_0": group(FP4, acts=FP4)}), except_head(ct_nvfp4)),
    "2:4 fp8": (ct({"group_0": group(FP8, acts={"num_bits": 8, "type": "float",
                                                "dynamic": True})},
                   sparsity_config={"format": "sparse-24-bitmask",
                                    "sparsity_structure": "2:4", "targets": ["Linear"]}),
                except_head(ct_sparse24_fp8)),
    "per-group schemes": (ct({"group_0": group(W4, targets=["re:.*self_attn.*"]),
                              "group_1": group(FP4, targets=["re:.*mlp.*"], acts=FP4)}),
                          attention_apart(ct_w4a16, ct_nvfp4)),
    "auto-round": ({"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True,
                    "packing_format": "auto_round:auto_gptq",
                    "extra_config": {"model.layers.0.mlp.down_proj": {"bits": 8}}},
                   lambda n, r, c: dense(n, r, c) if n == "lm_head" else
                   gptq(n, r, c, bits=8 if n == "model.layers.0.mlp.down_proj" else 4)),
}


def _planned_and_written(tmp_path, quant: dict, store) -> tuple[int, int]:
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "quantization_config": quant}))
    write_safetensors(tmp_path / "model.safetensors", llama_tensors(TINY, store))
    loaded = load_model(str(tmp_path))
    got = weight_bytes(loaded.spec, 16, loaded.spec.quant)
    found = loaded.file_weights
    return got.param_bytes + got.metadata_bytes, found.param_bytes + found.metadata_bytes


@pytest.mark.parametrize("name", CASES)
def test_planned_bytes_equal_the_checkpoint_in_the_formats_layout(tmp_path, name) -> None:
    quant, store = CASES[name]
    planned, written = _planned_and_written(tmp_path, quant, store)
    assert planned == written


def test_bitsandbytes_nf4_within_a_tenth_of_a_percent(tmp_path) -> None:
    quant = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
             "bnb_4bit_use_double_quant": True}
    planned, written = _planned_and_written(tmp_path, quant, except_head(bnb_nf4))
    assert abs(planned - written) <= 0.001 * written


def test_per_group_schemes_name_each_format_in_the_ledger() -> None:
    quant = parse_quantization(CASES["per-group schemes"][0])
    spec = load_model("llama-3.1-8b").spec
    names = {s.name for s in weight_bytes(spec, 16, quant).by_format}
    assert names == {"w4a16 g128", "nvfp4", "bf16"}


@pytest.mark.parametrize(("quant", "field"), [
    (ct({"group_0": group(W4)}, sparsity_config={"format": "marlin-24",
                                                 "sparsity_structure": "2:4"}),
     "quantization_config.sparsity_config"),
    ({"quant_method": "auto-round", "bits": 4, "packing_format": "auto_round:fp8",
      "data_type": "fp"}, "quantization_config.packing_format"),
    ({"quant_method": "bitsandbytes"}, "quantization_config.load_in_4bit"),
    (ct({"group_0": {"targets": "Linear", "weights": W4}}),
     "quantization_config.config_groups.group_0.targets"),
])
def test_a_format_it_cannot_store_is_refused_by_name(quant, field) -> None:
    with pytest.raises(SpecError) as err:
        parse_quantization(quant)
    assert err.value.field == field

