"""A bad value is named by the flag (or argument) it was typed with, once: a missing input file
read 'w.yaml: file = 'w.yaml': no such file' (the name twice, no flag), a negative
--shared-prefix or --group-size read as the Python field (shared_prefix, group_size), a broken
YAML gave the line but not what is wrong on it."""

import pytest
from bad_input_checks import one_line_error


@pytest.mark.parametrize(("flag", "name"), [("--workload", "w.yaml"),
                                            ("--trace", "t.csv"),
                                            ("--coefficients", "c.json")])
def test_a_missing_simulator_input_names_its_flag_once(run, tmp_path, flag, name) -> None:
    missing = tmp_path / name
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", flag, missing)
    one_line_error(result, f"servecap: error: {flag} = '{missing}': no such file")
    assert result.stderr.count(str(missing)) == 1


def test_a_missing_pack_file_names_the_argument(run, tmp_path) -> None:
    missing = tmp_path / "two.yaml"
    result = run("pack", missing)
    one_line_error(result, f"servecap: error: PACK_FILE = '{missing}': no such file")
    assert result.stderr.count(str(missing)) == 1


def test_a_folder_given_as_a_workload_names_the_flag(run, tmp_path) -> None:
    one_line_error(run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload",
                       tmp_path), f"--workload = '{tmp_path}': a regular file")


@pytest.mark.parametrize("args", [
    ("plan", "llama-3.1-8b", "--device", "24GiB", "--shared-prefix", "-1"),
    ("plan", "llama-3.1-8b", "--device", "24GiB", "--lengths", "5,6", "--shared-prefix", "-1"),
    ("blocks", "5", "--shared-prefix", "-1")])
def test_a_negative_shared_prefix_is_named_by_its_flag(run, args) -> None:
    one_line_error(run(*args), "--shared-prefix = -1: must be >= 0 tokens")


def test_a_negative_group_size_is_named_by_its_flag(run) -> None:
    """Refused even where bf16 weights do not read it, as the scenario file's field is."""
    for args in (("--weight-dtype", "int4"), ()):
        one_line_error(run("plan", "llama-3.1-8b", "--device", "24GiB", "--group-size", "-1",
                           *args), "--group-size = -1: a whole number >= 1 (0: per channel)")


def test_broken_yaml_says_what_is_wrong_on_the_line(run, tmp_path) -> None:
    broken = tmp_path / "s.yaml"
    broken.write_text("a: 1\n  b: 2\n")
    one_line_error(run("plan", "--scenario", broken), "line 2",
                   "not valid YAML (mapping values are not allowed in this context)")


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--device", "-5GiB", "a device's memory, more than 0"),
    ("--runtime-peak", "-3GiB", "not negative: a size like 40GiB"),
    ("--weights", "-1GiB", "not negative: a size like 40GiB")])
def test_a_negative_size_is_called_negative(run, flag, value, said) -> None:
    """'--device -5GiB' read 'expected a catalog name ... or a size like 40GiB', as if the
    number were misspelt, where '--device 0' says what is wrong: it must be more than 0."""
    args = ["plan", "llama-3.1-8b", "--context", "8192", flag, value]
    if flag != "--device":
        args += ["--device", "24GiB"]
    one_line_error(run(*args), f"{flag} = '{value}': {said}")


def test_a_pack_instance_that_cannot_be_planned_is_named(run, tmp_path) -> None:
    """A misspelt model in a pack's second instance read 'two.yaml: model = ...', naming
    neither the instance nor its line, where a bad flag there names instances[1].launch."""
    pack = tmp_path / "two.yaml"
    pack.write_text("devices: [h100-80gb]\ninstances:\n"
                    "  - launch: vllm serve llama-3.1-8b --max-model-len 8192 "
                    "--gpu-memory-utilization 0.4\n"
                    "  - name: code\n    launch: vllm serve llama-3.1-8bb --max-model-len 8192 "
                    "--gpu-memory-utilization 0.4\n")
    one_line_error(run("pack", pack), f"{pack}: instances[1] (code): model = 'llama-3.1-8bb'",
                   "did you mean llama-3.1-8b?")


@pytest.mark.parametrize("make", [lambda tmp: tmp / "vllm.log", lambda tmp: tmp])
def test_reconcile_names_an_unreadable_log_before_the_model(run, tmp_path, make) -> None:
    """A mistyped log path with no --model read '--model is missing', sending the user after
    the wrong input."""
    log = make(tmp_path)
    result = run("reconcile", log)
    one_line_error(result, f"log = '{log}'")
    assert "--model" not in result.stderr
