"""A bad scenario file, or a bad value in one, is one line naming the file, the field, the
value and what is allowed, before anything runs; the same value given as a flag is named as
the flag; a workbook given as a scenario is named by the flag it came with."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(("text", "needles"), [
    ("client:\n  turns: 0\n", ("client.turns = 0", "greater than or equal to 1")),
    ("client:\n  url: http://x\n", ("client.url", "unknown key", "endpoint")),
    ("server:\n  port: 8000\n", ("server.port = 8000", "unknown key", "served_model_name")),
    ("client:\n  sweep_tolerance: 1.5\n", ("client.sweep_tolerance = 1.5", "less than 1")),
])
def test_a_bad_load_or_serve_scenario_is_one_line_before_anything_runs(text, needles,
                                                                       tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    for args in (["load", "http://127.0.0.1:9/v1"], ["serve"]):
        result = runner.invoke(app, [*args, "--scenario", str(bad)])
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert "\n" not in line and "Traceback" not in line and str(bad) in line
        for needle in needles:
            assert needle in line


def test_a_load_scenario_names_what_load_refuses_as_load_does(tmp_path):
    """A --sweep scenario without a workload file is refused by the flag's name, before any
    request is sent (no server listens on port 9)."""
    saved = tmp_path / "s.yaml"
    saved.write_text("client:\n  sweep: true\nworkload:\n  input_len: 8\n  output_len: 2\n")
    result = runner.invoke(app, ["load", "http://127.0.0.1:9/v1", "--scenario", str(saved)])
    assert result.exit_code == 2 and "--workload" in result.stderr, result.output


@pytest.mark.parametrize(("text", "field"), [
    ("dtypes:\n  kv_cache_dtype: fp8\n", "dtypes.kv_cache_dtype = 'fp8': null"),
    ("parallel:\n  tensor_parallel_size: 2\n", "parallel.tensor_parallel_size = 2: 1"),
    ("speculative:\n  model: tiny-llama\n", "speculative.model = 'tiny-llama': null"),
])
def test_serve_refuses_by_field_what_a_scenario_asks_that_it_does_not_run(text, field,
                                                                          tmp_path):
    saved = tmp_path / "s.yaml"
    saved.write_text(text)
    result = runner.invoke(app, ["serve", "tiny-llama", "--scenario", str(saved)])
    assert result.exit_code == 2 and field in result.stderr, result.output
    assert "serve runs one rank" in result.stderr


@pytest.mark.parametrize(("text", "flags", "line"), [
    ("device: {name: h100}\n", [], "device.name = 'h100': expected a catalog name"),
    ("dtypes: {kv_cache_dtype: fp9}\n", ["--device", "h100-80gb"],
     "dtypes.kv_cache_dtype = 'fp9': allowed: fp32, bf16, fp16, fp8, int8, int4"),
    ("memory: {safety: 10}\n", ["--device", "h100-80gb"],
     "memory.safety = 10: a size without a unit would be 10 bytes"),
    ("speculative: {num_speculative_tokens: 99}\n", ["--device", "h100-80gb", "--input-len",
                                                      "8", "--output-len", "2"],
     "speculative.num_speculative_tokens = 99: a whole number in 1..64"),
])
def test_a_bad_value_from_a_scenario_file_names_the_file_and_its_field(text, flags, line,
                                                                       tmp_path):
    """docs/scenario.md: 'one line naming the file, the field, the value and what is allowed';
    a value the derivations refuse was reported as the flag (--device = 'h100', --kv-dtype,
    --safety = '10'), the file not named."""
    bad = tmp_path / "s4.yaml"
    bad.write_text(text)
    command = "simulate" if "speculative" in text else "plan"
    result = runner.invoke(app, [command, "llama-3.1-8b", *flags, "--scenario", str(bad)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"servecap: error: {bad}: {line}"), result.stderr


def test_the_same_bad_value_given_as_a_flag_is_named_as_the_flag(tmp_path):
    """The flag given beside the file wins, and a bad flag is the flag's error, not the
    file's; a field the file could have given is named beside a flag reported missing."""
    saved = tmp_path / "s.yaml"
    saved.write_text("device: {name: h100}\n")
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--scenario", str(saved),
                                 "--device", "h1000"])
    assert result.stderr.startswith("servecap: error: --device = 'h1000': "), result.stderr
    saved.write_text("dtypes: {kv_cache_dtype: fp8}\n")
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--scenario", str(saved)])
    assert result.stderr.startswith(f"servecap: error: --device (or device.name in {saved}) "
                                    "is missing: "), result.stderr


def test_a_workbook_that_is_not_one_is_named_by_the_flag_it_was_given_with(tmp_path):
    """plan --scenario fake.xlsx blamed --from-workbook; a missing workbook was 'a pipe,
    device or folder'."""
    fake = tmp_path / "fake.xlsx"
    fake.write_text("not a zip")
    out = runner.invoke(app, ["plan", "--scenario", str(fake)])
    assert out.stderr.strip() == (f"servecap: error: --scenario = '{fake}': not a readable "
                                  ".xlsx workbook (BadZipFile)")
    for flag in ("--scenario", "--from-workbook"):
        out = runner.invoke(app, ["plan", flag, str(tmp_path / "nope.xlsx")])
        assert out.exit_code == 2
        assert out.stderr.strip() == (f"servecap: error: {flag} = '{tmp_path / 'nope.xlsx'}': "
                                      "no such file")
    out = runner.invoke(app, ["plan", "--from-workbook", str(tmp_path)])
    assert "a pipe, device or folder" in out.stderr
    out = runner.invoke(app, ["plan", "--scenario", str(tmp_path / "nope.yaml")])
    assert out.stderr.strip() == (f"servecap: error: --scenario = '{tmp_path / 'nope.yaml'}': "
                                  "no such file")  # it read "nope.yaml: file = 'nope.yaml'"


def test_a_workbook_of_a_bare_size_says_simulate_needs_its_rates(tmp_path):
    """README's plan --device 40GiB --xlsx, then simulate --scenario that workbook, said only
    '--bandwidth is missing: required for a device given by size': the workbook's device is a
    bare size, which carries no bandwidth; the line says so and names both fixes."""
    book = tmp_path / "capacity.xlsx"
    assert runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "40GiB", "--context",
                               "4096", "--xlsx", str(book)]).exit_code == 0
    out = runner.invoke(app, ["simulate", "--scenario", str(book), "--workload",
                              "workloads/chat.yaml", "--rate", "8"])
    assert out.exit_code == 2
    assert out.stderr.strip() == (
        f"servecap: error: --bandwidth (or device.bandwidth in {book}) is missing: the device "
        "'40GiB' is a bare size, not a catalog device, so it has no memory bandwidth or FLOPS "
        "for the step model: give --bandwidth and --flops (e.g. --bandwidth 2000GB/s --flops "
        "990TFLOPS), or a catalog --device (servecap devices)")


@pytest.mark.parametrize("flag", ["--from-workbook", "--scenario"])
def test_a_bad_value_in_a_workbooks_record_names_the_workbook_and_field(flag, tmp_path):
    from openpyxl import load_workbook

    book = tmp_path / "cap.xlsx"
    assert runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "a100-40gb", "--context",
                               "4096", "--xlsx", str(book)]).exit_code == 0
    wb = load_workbook(book)
    row = next(r for r in wb["Scenario"].iter_rows() if r[0].value == "dtypes.kv_cache_dtype")
    row[1].value = "fp9"
    wb.save(book)
    out = runner.invoke(app, ["plan", flag, str(book)])
    assert out.exit_code == 2
    assert out.stderr.strip() == (f"servecap: error: {book}: dtypes.kv_cache_dtype = 'fp9': "
                                  "allowed: fp32, bf16, fp16, fp8, int8, int4")


def test_a_model_files_bare_size_device_is_named_not_none() -> None:
    """simulate teaching-7b without --device takes the model file's serving.device (40GiB),
    and the missing-bandwidth line read 'the device None is a bare size'."""
    out = runner.invoke(app, ["simulate", "teaching-7b", "--input-len", "10", "--output-len",
                              "2"])
    assert out.exit_code == 2
    assert "the device '40GiB' (the model file's serving.device) is a bare size" in out.stderr
    assert "None" not in out.stderr
