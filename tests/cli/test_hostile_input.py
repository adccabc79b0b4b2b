"""Hostile input: wrong types, impossible values and conflicting flags each get one named line."""

import json
import struct

import pytest
from bad_input_checks import BASE, LLAMA, model_yaml, one_line_error


def _config(tmp_path, **fields) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **fields}))
    return str(path)


@pytest.mark.parametrize("value", ['"2"', "1.5", "true", "[2]", "2.0"])
def test_a_layer_count_of_the_wrong_type_is_not_coerced(run, tmp_path, value) -> None:
    path = model_yaml(tmp_path, BASE + f"num_hidden_layers: {value}\n")
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"), "model.yaml",
                   "num_hidden_layers")


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("head_dim", 0, "head_dim"),
    ("sliding_window", 0, "sliding_window"),
    ("torch_dtype", "float64", "torch_dtype"),
    ("quantization_config", {"quant_method": "gptq", "bits": "x"}, "quantization_config"),
    ("quantization_config", {"quant_method": "fp8", "weight_block_size": [128]},
     "quantization_config"),
    ("quantization_config", {"quant_method": "fp8", "weight_block_size": [0, 128]},
     "weight_block_size"),
])
def test_impossible_config_json_values_name_the_file(run, tmp_path, field, value, needle) -> None:
    result = run("plan", _config(tmp_path, **{field: value}), "--device", "1GiB", "--context", "8")
    one_line_error(result, "config.json", needle)


def test_more_active_experts_than_experts(run, tmp_path) -> None:
    path = _config(tmp_path, model_type="mixtral", num_local_experts=4, num_experts_per_tok=5)
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"),
                   "num_experts_per_tok", "4 routed experts")


def test_negative_index_total_size(run, tmp_path) -> None:
    _config(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {"total_size": -5}}')
    one_line_error(run("plan", tmp_path, "--device", "1GiB", "--context", "8"),
                   "total_size", "-5")


def test_corrupt_safetensors_offsets(run, tmp_path) -> None:
    _config(tmp_path)
    header = json.dumps({"w.weight": {"dtype": "BF16", "shape": [2],
                                      "data_offsets": [4, "x"]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    one_line_error(run("plan", tmp_path, "--device", "1GiB", "--context", "8"),
                   "w.weight.data_offsets")


@pytest.mark.parametrize("text", ["", ",", "17,,33", "17 33", "1.5", "17,-3", "0"])
def test_lengths_that_are_not_a_list_of_counts(run, text) -> None:
    one_line_error(run("plan", "teaching-7b", "--lengths", text), "--lengths")


@pytest.mark.parametrize("flag", ["--context", "--concurrency"])
def test_lengths_conflict_with_context_and_concurrency(run, flag) -> None:
    one_line_error(run("plan", "teaching-7b", "--lengths", "17,33", flag, "5"), flag,
                   "either --lengths")


def test_lengths_tolerate_spaces_after_commas(run) -> None:
    result = run("plan", "teaching-7b", "--lengths", "17, 33, 65", "--json")
    assert json.loads(result.stdout)["lengths_tokens"] == [17, 33, 65]


@pytest.mark.parametrize("safety", ["nan%", "inf%", "100%", "-1%"])
def test_safety_percentages_outside_0_to_100(run, safety) -> None:
    one_line_error(run("plan", "teaching-7b", "--safety", safety), "--safety", "below 100%")


def test_blocks_refuses_a_negative_shared_prefix(run) -> None:
    one_line_error(run("blocks", "17", "--shared-prefix", "-1"), "--shared-prefix = -1")


def test_negative_int4_group_size(run) -> None:
    one_line_error(run("plan", "llama-3.1-8b", "--device", "80GiB", "--weight-dtype", "int4",
                       "--group-size", "-1"), "--group-size = -1")


@pytest.mark.parametrize("device", ["99999999999999999999999GiB", "65TiB"])
def test_a_device_size_no_accelerator_has(run, device) -> None:
    one_line_error(run("plan", "teaching-7b", "--device", device), "--device", "64 TiB")


def test_reconcile_style_engine_knob_of_another_engine(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--engine", "sglang",
                       "--gpu-memory-utilization", "0.9"), "--gpu-memory-utilization",
                   "--engine vllm")


def test_a_bad_serving_default_is_named_in_the_model_file(run, tmp_path) -> None:
    path = model_yaml(tmp_path, BASE + "num_hidden_layers: 2\nserving:\n  device: foo\n")
    one_line_error(run("plan", path, "--context", "8"), "model.yaml: serving.device = 'foo'")


def test_a_missing_required_key_is_named_without_dumping_the_file(run, tmp_path) -> None:
    path = model_yaml(tmp_path, BASE.replace("name: m\n", "") + "num_hidden_layers: 2\n")
    result = run("plan", path, "--device", "1GiB", "--context", "8")
    one_line_error(result, "model.yaml: name is missing: required")
    assert "hidden_size" not in result.stderr


def test_an_absurd_concurrency_is_refused_not_planned_request_by_request(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--concurrency", "100000000"), "concurrency",
                   "65,536")


@pytest.mark.parametrize("flag", ["--tensor-parallel-size", "--pipeline-parallel-size"])
def test_a_kv_only_model_cannot_be_split_and_the_right_flag_is_named(run, flag) -> None:
    one_line_error(run("plan", "teaching-7b", flag, "2"), flag, "no architecture")


def test_a_bare_fraction_as_safety_points_to_the_percent_form(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--safety", "0.1"), "--safety = '0.1'", "10%")


def test_an_empty_model_name_is_not_the_working_directory(run) -> None:
    one_line_error(run("plan", "", "--device", "1GiB"), "model = ''", "bundled model name")
