"""Hostile inputs to `servecap simulate`: one stderr line, exit 2, no traceback, no file."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

DEVICE = ["llama-3.1-8b", "--device", "h100-80gb"]
HEADER = "arrival_s,prompt_tokens,output_tokens\n"
GOOD = {"seed": 1, "num_requests": 5, "arrivals": {"kind": "poisson", "rate_per_s": 2},
        "prompt_tokens": {"kind": "fixed", "value": 20},
        "output_tokens": {"kind": "fixed", "value": 4}}


def _fails(*args) -> str:
    out = CliRunner().invoke(app, ["simulate", *DEVICE, *(str(a) for a in args)])
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert "Traceback" not in out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servecap: error: "), out.output
    return lines[0]


@pytest.mark.parametrize(("body", "needle"), [
    (b"\xff\xfe\x00garbage", "not UTF-8 text"),
    (HEADER.encode() + b"inf,10,5\n", "arrival_s = 'inf': a finite number >= 0"),
    (HEADER.encode() + b"-1,10,5\n", "arrival_s = '-1'"),
    (HEADER.encode() + b"0,abc,5\n", "prompt_tokens = 'abc'"),
    (HEADER.encode() + b"0,10\n", "output_tokens = ''"),
    (b"", "missing column(s) arrival_s"),
    (HEADER.encode(), "at least one request row"),
])
def test_bad_traces(tmp_path, body, needle):
    trace = tmp_path / "t.csv"
    trace.write_bytes(body)
    line = _fails("--trace", trace)
    assert needle in line and "t.csv" in line


@pytest.mark.parametrize(("patch", "needle"), [
    ({"arrivals": {"kind": "fixed", "times_s": [float("inf")]}}, "arrivals.times_s[0] = inf"),
    ({"arrivals": {"kind": "poisson", "rate_per_s": float("inf")}}, "arrivals.rate_per_s"),
    ({"arrivals": {"kind": "poisson", "rate_per_s": -3}}, "arrivals.rate_per_s = -3"),
    ({"prompt_tokens": {"kind": "empirical", "values": []}}, "prompt_tokens.values"),
    ({"num_requests": "ten"}, "num_requests = 'ten'"),
    ({"bogus": 1}, "bogus = 1: unknown key"),
])
def test_bad_workloads(tmp_path, patch, needle):
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(GOOD | patch).replace("Infinity", ".inf"))
    line = _fails("--workload", path)
    assert needle in line and "w.yaml" in line


def test_binary_workload(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_bytes(b"\xff\xfe\x00\x81")
    assert "not UTF-8 text" in _fails("--workload", path)


@pytest.mark.parametrize("target", ["folder", "missing/out.csv"])
def test_unwritable_records_fail_before_simulating(tmp_path, target):
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(GOOD))
    (tmp_path / "folder").mkdir()
    line = _fails("--workload", workload, "--records", tmp_path / target)
    assert line.startswith("servecap: error: --records")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "w.yaml"]


def test_zero_rates_are_refused(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(GOOD))
    line = _fails("--workload", workload, "--device", "80GiB", "--bandwidth", "0GB/s",
                  "--flops", "990TFLOPS")
    assert "--bandwidth = '0GB/s': a rate > 0" in line
    assert "--flops = '0TFLOPS'" in _fails("--workload", workload, "--device", "80GiB",
                                            "--bandwidth", "2000GB/s", "--flops", "0TFLOPS")


def test_read_only_folder_is_one_line(tmp_path):
    if Path("/proc").is_dir():
        workload = tmp_path / "w.yaml"
        workload.write_text(json.dumps(GOOD))
        assert "cannot be written" in _fails("--workload", workload, "--records",
                                             "/proc/out.csv")


@pytest.mark.parametrize("rates", ["nan,1", "inf", "0,2", "x"])
def test_sweep_rates_must_be_finite_and_positive(tmp_path, rates):
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(GOOD))
    out = CliRunner().invoke(app, ["sweep", *DEVICE, "--workload", str(workload),
                                   "--rates", rates])
    assert out.exit_code == 2, out.output
    assert out.output.startswith(f"servecap: error: --rates = {rates!r}")


@pytest.mark.parametrize("command", ["simulate", "speculate"])
def test_an_unknown_draft_is_named_as_draft(tmp_path, command):
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(GOOD))
    extra = ["--workload", str(workload)] if command == "simulate" else []
    out = CliRunner().invoke(app, [command, *DEVICE, *extra, "--draft", "no-such-draft"])
    assert out.exit_code == 2, out.output
    assert out.output.startswith("servecap: error: --draft = 'no-such-draft'")


def test_a_trace_with_a_bom_crlf_and_quotes_replays(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_bytes(b"\xef\xbb\xbf" + HEADER.encode().replace(b"\n", b"\r\n")
                      + b'0,10,5\r\n0.5,"20",3\r\n')
    out = CliRunner().invoke(app, ["simulate", *DEVICE, "--trace", str(trace), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["policies"][0]["completed"] == 2


def test_a_long_bad_cell_is_shortened_in_the_error(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "0," + "x" * 5000 + ",5\n")
    line = _fails("--trace", trace)
    assert len(line) < 200 and "xxx..." in line


def test_an_output_never_overwrites_an_input(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "0,10,5\n")
    line = _fails("--trace", trace, "--records", trace)
    assert "--records" in line and "is an input of this run" in line
    assert trace.read_text() == HEADER + "0,10,5\n"


@pytest.mark.parametrize(("flag", "value"), [("--slo-ttft", "500"), ("--slo-itl", "0.05"),
                                             ("--step-overhead", "2")])
def test_a_duration_without_its_unit_is_refused(flag, value):
    line = _fails("--workload", Path(__file__).parents[2] / "workloads" / "chat.yaml", flag, value)
    assert f"{flag} = '{value}': a duration needs its unit: {value}ms or {value}s" in line


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--acceptance", "1.5", "--acceptance = 1.5: a probability in [0, 1]"),
    ("--acceptance", "-0.1", "--acceptance = -0.1: a probability in [0, 1]"),
    ("--draft-length", "0", "--draft-length = 0: a whole number in 1..64"),
])
def test_speculative_values_are_checked_without_a_draft_too(flag, value, message):
    """Without --draft these exited 0 (the value silently unused); with --draft the same value
    was refused. One rule now, whether or not a draft is given."""
    line = _fails("--input-len", 10, "--output-len", 4, "--num-requests", 2, flag, value)
    assert line.startswith(f"servecap: error: {message}"), line
    fine = CliRunner().invoke(app, ["simulate", *DEVICE, "--input-len", "10", "--output-len",
                                    "4", "--num-requests", "2", "--acceptance", "0.9"])
    assert fine.exit_code == 0, fine.output
