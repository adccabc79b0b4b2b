"""Bad input: one line naming the field and value, a non-zero exit, never a traceback."""

import json

import pytest
from bad_input_checks import BASE, model_yaml, one_line_error


def test_missing_file(run) -> None:
    one_line_error(run("plan", "no/such/model.yaml", "--device", "40GiB"), "no/such/model.yaml",
                   "bundled")


def test_yaml_that_is_not_a_mapping(run, tmp_path) -> None:
    one_line_error(run("plan", model_yaml(tmp_path, "- a\n- b\n"), "--device", "1GiB"),
                   "model.yaml", "mapping")


def test_unknown_key(run, tmp_path) -> None:
    path = model_yaml(tmp_path, BASE + "num_hidden_layers: 2\nnum_layerz: 3\n")
    one_line_error(run("plan", path, "--device", "1GiB"), "num_layerz", "allowed keys")


@pytest.mark.parametrize(("field", "value"), [("num_hidden_layers", 0),
                                              ("num_hidden_layers", -2),
                                              ("hidden_size", 0)])
def test_zero_or_negative_dimensions(run, tmp_path, field, value) -> None:
    text = (BASE + "num_hidden_layers: 2\n").replace(f"{field}: ", f"{field}_old: ")
    text = "\n".join(line for line in text.splitlines() if not line.startswith(field + "_old"))
    path = model_yaml(tmp_path, text + f"\n{field}: {value}\n")
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"), field, str(value))


def test_zero_kv_heads(run, tmp_path) -> None:
    path = model_yaml(tmp_path, BASE.replace("num_key_value_heads: 2", "num_key_value_heads: 0")
                      + "num_hidden_layers: 2\n")
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"),
                   "num_key_value_heads", "0")


def test_query_heads_not_a_multiple_of_kv_heads(run, tmp_path) -> None:
    path = model_yaml(tmp_path, BASE.replace("num_key_value_heads: 2", "num_key_value_heads: 3")
                      + "num_hidden_layers: 2\n")
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"),
                   "num_attention_heads", "multiple")


def test_unknown_dtype(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--kv-dtype", "fp7"), "--kv-dtype", "fp7",
                   "bf16")


def test_size_in_gigs(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--device", "40 gigs"), "40 gigs", "40GiB")


def test_context_zero(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--context", "0"), "context", "0")


def test_unknown_architecture_fails_closed(run, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba", "hidden_size": 64}))
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"), "model_type",
                   "mamba", "llama")


def test_unknown_quantization_fails_closed(run, tmp_path) -> None:
    path = model_yaml(tmp_path, BASE + "num_hidden_layers: 2\nquantization_config:\n"
                      "  quant_method: hqq\n")
    one_line_error(run("plan", path, "--device", "1GiB", "--context", "8"), "quant_method",
                   "hqq", "bitsandbytes")


def test_device_smaller_than_weights_exits_1_with_a_statement(run) -> None:
    result = run("plan", "teaching-7b", "--device", "8GiB")
    assert result.exit_code == 1
    assert "weights alone do not fit" in result.stdout
    assert "Traceback" not in result.output


def test_bad_lengths(run) -> None:
    one_line_error(run("plan", "teaching-7b", "--lengths", "17,x"), "--lengths", "17,x")


def test_a_mistyped_bundled_name_gets_the_closest_one(run) -> None:
    one_line_error(run("plan", "llama3.1-8b", "--device", "40GiB"), "model = 'llama3.1-8b'",
                   "did you mean llama-3.1-8b?", "bundled: ")


def test_a_missing_device_reads_as_missing_not_as_none(run) -> None:
    result = run("plan", "llama-3.1-8b", "--context", "4096")
    one_line_error(result, "--device is missing: required: a catalog name")
    assert "None" not in result.stderr


def test_a_shortened_bundled_name_gets_the_full_one(run) -> None:
    one_line_error(run("speculate", "llama-3.1-8b", "--device", "h100-80gb", "--draft",
                       "llama-3.2-1b"), "did you mean llama-3.2-1b-instruct?")


def test_a_missing_trace_or_log_says_no_such_file(run, tmp_path) -> None:
    one_line_error(run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--trace",
                       tmp_path / "nope.csv"), "nope.csv': no such file")
    one_line_error(run("reconcile", tmp_path / "nope.log", "--model", "qwen3-14b"),
                   "nope.log': no such file")


@pytest.mark.parametrize(("text", "said"), [("", "document = empty"),
                                            ("42\n", "document = a number (42)"),
                                            ("- 1\n", "document = a list"),
                                            ("hello\n", "document = a string ('hello')")])
@pytest.mark.parametrize("command", ["workload", "model", "pack"])
def test_a_file_that_is_not_a_mapping_says_what_it_holds(run, tmp_path, text, said,
                                                         command) -> None:
    """An empty workload read 'document = 'NoneType'', a number 'int': Python's type names,
    not what the file holds."""
    path = tmp_path / "f.yaml"
    path.write_text(text)
    args = {"workload": ("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload",
                         path),
            "model": ("plan", path, "--device", "h100-80gb"), "pack": ("pack", path)}[command]
    result = run(*args)
    one_line_error(result, f"{path}: {said}: ")
    assert "NoneType" not in result.stderr and "'int'" not in result.stderr


@pytest.mark.parametrize("args", [("--tokens-per-s", "1000"),
                                  ("llama-3.1-8b", "--device", "h100-80gb", "--input-len",
                                   "100", "--output-len", "10")])
@pytest.mark.parametrize("target", ["0", "1.5", "-1"])
def test_cost_refuses_a_target_outside_0_1_without_an_slo(run, args, target) -> None:
    """cost checked --target only where an SLO made it sweep: beside --tokens-per-s, or a
    saturation run, --target 1.5 was taken without a word."""
    one_line_error(run("cost", *args, "--target", target),
                   f"--target = {float(target)}: a share of requests in (0, 1]")


def test_broken_json_says_what_is_wrong_and_where(run, tmp_path) -> None:
    """A broken coefficients file read 'json = 'line 1': not valid JSON', not what or where
    on the line, as a broken YAML file says."""
    broken = tmp_path / "c.json"
    broken.write_text('{"a": 1,}')
    one_line_error(run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len",
                       "10", "--output-len", "2", "--coefficients", broken),
                   f"{broken}: json = 'line 1': not valid JSON (expecting property name "
                   "enclosed in double quotes at column 9)")


def test_a_model_directorys_broken_config_is_named_as_the_file(run, tmp_path) -> None:
    """The error named the directory, which holds several JSON files, not its config.json."""
    (tmp_path / "config.json").write_text('{"model_type": "llama"\n"x": 1}')
    one_line_error(run("plan", tmp_path, "--device", "40GiB"),
                   f"{tmp_path / 'config.json'}: json = 'line 2': not valid JSON")
