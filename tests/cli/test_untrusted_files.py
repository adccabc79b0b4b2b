"""Files and values built to break a parser: each is one named line and exit 2, fast."""

import json
import os
from pathlib import Path

import pytest
from bad_input_checks import BASE, LLAMA, one_line_error

LAYERS = "num_hidden_layers: 2\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
CHAT_PATH = Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml"
CHAT = CHAT_PATH.read_text()


def _write(tmp_path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _plan(run, path):
    return run("plan", path, "--device", "1GiB", "--context", "8")


@pytest.mark.parametrize(("text", "needles"), [
    (BASE.replace("vocab_size: 100", "vocab_size: " + "9" * 5000) + LAYERS, ("unreadable number",)),
    (BASE.replace("vocab_size: 100", "vocab_size: 1" + "0" * 400) + LAYERS,
     ("vocab_size", "2^62")),
    (BASE + LAYERS + "notes: " + "[" * 50_000 + "]" * 50_000 + "\n", ("nested deeper",)),
    (BOMB + BASE.replace("name: m", "name: *b") + LAYERS, ("aliases",)),
    (BOMB + BASE + LAYERS + "foo: *b\n", ("aliases",)),
    (BASE + LAYERS + "quantization_config:\n  quant_method: gptq\n  bits: 4\n"
     "  group_size: .inf\n", ("group_size", "finite")),
    (BASE + LAYERS + "quantization_config:\n  quant_method: gptq\n  bits: 4.7\n",
     ("bits = 4.7", "whole number")),
])
def test_hostile_modelmodel_yaml(run, tmp_path, text, needles) -> None:
    result = _plan(run, _write(tmp_path, "model.yaml", text))
    one_line_error(result, "model.yaml", *needles)
    assert len(result.stderr) < 400  # the value is never echoed whole


@pytest.mark.parametrize(("text", "needle"), [
    ("[" * 50_000 + "]" * 50_000, "nested deeper"),
    (json.dumps(LLAMA).replace('"vocab_size": 100', '"vocab_size": ' + "9" * 5000),
     "unreadable number"),
])
def test_hostile_config_json(run, tmp_path, text, needle) -> None:
    one_line_error(_plan(run, _write(tmp_path, "config.json", text)), "config.json", needle)


def test_a_config_json_with_a_utf8_bom_is_read(run, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA), encoding="utf-8-sig")
    result = run("plan", path, "--device", "1GiB", "--context", "8", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["model"] == tmp_path.name


def test_an_index_total_size_of_10_to_the_400(run, tmp_path) -> None:
    _write(tmp_path, "config.json", json.dumps(LLAMA))
    _write(tmp_path, "model.safetensors.index.json",
           '{"metadata": {"total_size": 1' + "0" * 400 + "}}")
    one_line_error(_plan(run, tmp_path), "total_size", "2^62")


def test_a_fifo_as_safetensors_does_not_block(run, tmp_path) -> None:
    _write(tmp_path, "config.json", json.dumps(LLAMA))
    os.mkfifo(tmp_path / "model.safetensors")
    one_line_error(_plan(run, tmp_path), "model.safetensors", "not a regular file")


@pytest.mark.parametrize("make", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("command", ["plan", "reconcile", "trace"])
def test_pipes_and_devices_are_refused_before_reading(run, tmp_path, make, command) -> None:
    path = Path(make)
    if make == "fifo":
        path = tmp_path / "input"
        os.mkfifo(path)
    args = {"plan": ("plan", path, "--device", "1GiB"),
            "reconcile": ("reconcile", path, "--model", "teaching-7b"),
            "trace": ("simulate", "teaching-7b", "--device", "h100-80gb", "--trace", path)}
    one_line_error(run(*args[command]), "regular file")


@pytest.mark.parametrize("log", sorted(
    (Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs").glob("*.log")),
    ids=lambda p: p.name)
def test_a_vllm_log_given_as_the_model_is_named_as_such(run, log) -> None:
    one_line_error(run("plan", log, "--device", "1GiB"), "vLLM log", "servecap reconcile")


def test_a_raw_vllm_log_that_parses_as_yaml_is_still_named(run, tmp_path) -> None:
    log = _write(tmp_path, "vllm.log", "INFO 09-10 12:00:00 [gpu_worker.py:276] Available KV "
                 "cache memory: 30.00 GiB\n")
    one_line_error(run("plan", log, "--device", "1GiB"), "vLLM log")


def test_a_5000_digit_figure_in_a_vllm_log(run, tmp_path) -> None:
    log = _write(tmp_path, "vllm.log", "INFO 01-01 00:00:00 worker.py:1] # GPU blocks: "
                 + "9" * 5000 + ", # CPU blocks: 2048\n")
    one_line_error(run("reconcile", log, "--model", "teaching-7b", "--device", "80GiB"),
                   "num_gpu_blocks", "5,000 digits")


@pytest.mark.parametrize(("old", "new", "needles"), [
    ("sigma: 0.9", "sigma: 1e300", ("prompt_tokens.sigma", "[0, 10]")),
    ("rate_per_s: 8", "rate_per_s: 1e-320", ("rate_per_s", "1e-06")),
    ("name: chat", "name: *b", ("aliases",)),
    ("seed: 7", "seed: " + "[" * 50_000 + "]" * 50_000, ("nested deeper",)),
])
def test_hostile_workloadmodel_yaml(run, tmp_path, old, new, needles) -> None:
    text = (BOMB if "*b" in new else "") + CHAT.replace(old, new)
    path = _write(tmp_path, "w.yaml", text)
    one_line_error(run("simulate", "teaching-7b", "--device", "h100-80gb", "--workload", path),
                   "w.yaml", *needles)


@pytest.mark.parametrize(("args", "needle"), [
    (("plan", "teaching-7b", "--lengths", "²"), "--lengths"),
    (("plan", "teaching-7b", "--lengths", "1" * 5000), "--lengths"),
    (("simulate", "teaching-7b", "--device", "h100-80gb", "--disaggregate", "²:1",
      "--workload", CHAT_PATH), "--disaggregate"),
    (("plan", "teaching-7b", "--safety", ""), "--safety = ''"),
    (("plan", "teaching-7b", "--runtime-peak", ""), "--runtime-peak = ''"),
])
def test_unicode_digits_and_empty_values(run, args, needle) -> None:
    one_line_error(run(*args), needle)


@pytest.mark.parametrize(("flag", "offer"), [
    ("--safety", "10% (of the device) or 10GiB"), ("--runtime-peak", "10GiB or 10GB"),
    ("--weights", "10GiB or 10GB"), ("--cuda-graph-memory", "10GiB or 10GB"),
    ("--non-torch", "10GiB or 10GB"),
])
def test_a_size_without_a_unit_is_refused_on_every_size_flag(run, flag, offer) -> None:
    extra = ("--engine", "vllm") if flag in ("--cuda-graph-memory", "--non-torch") else ()
    one_line_error(run("plan", "teaching-7b", flag, "10", *extra), flag, offer)


@pytest.mark.parametrize("value", ["0", "2097152", "10GiB"])
def test_zero_and_large_byte_counts_stay_bytes(run, value) -> None:
    result = run("plan", "teaching-7b", "--runtime-peak", value, "--json")
    assert result.exit_code in (0, 1), result.output
