"""Every failure is a verdict: one violated line each, exit 1, stated once; the first command
a new user types gives the one-line error it should."""

import json
import time

import yaml
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.model_configs import load_model


def _invoke(*args: str):
    return CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu", *args])


def _tiny_dir(tmp_path):
    """tiny-llama as a checkpoint directory: a config.json and no serving defaults."""
    data = yaml.safe_load(load_model("tiny-llama").path.read_text())
    data.pop("serving"), data.pop("source"), data.pop("name")
    (tmp_path / "config.json").write_text(json.dumps(data))
    return tmp_path


def test_bare_verify_on_the_cpu_names_device_memory(tmp_path) -> None:
    result = CliRunner().invoke(app, ["verify", str(_tiny_dir(tmp_path)), "--device", "cpu"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert "--device-memory" in result.stderr and "required with --device cpu" in result.stderr
    assert "bytes is not a device" not in result.stderr


def test_out_of_memory_in_warm_up_is_a_violation_naming_the_phase() -> None:
    # a 32 KiB runtime budget and no safety: the pool takes the rest, the profile step has none
    result = _invoke("--runtime-peak", "32KiB", "--safety", "0B", "--output-tokens", "2",
                     "--no-probe", "--json")
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert "out_of_memory_warmup" in out["violations"] and not out["ok"]
    line = next(item for item in out["lines"] if item["line"] == "out_of_memory_warmup")
    assert line["verdict"] == "violated" and "warm-up" in line["detail"]
    assert "out of memory during warm-up" in result.stderr
    assert len(out["violations"]) == len(set(out["violations"]))


def test_a_violation_is_printed_once() -> None:
    result = _invoke("--runtime-peak", "32KiB", "--safety", "0B", "--output-tokens", "2",
                     "--no-probe")
    assert result.exit_code == 1
    assert result.stderr.count("violated:") == 1
    assert "violated:" not in result.stdout
    assert "warm-up" in result.stdout  # its own line in the table


def test_no_probe_leaves_the_ceiling_unmeasured_not_violated() -> None:
    result = _invoke("--output-tokens", "2", "--no-probe", "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["measured_ceiling_requests"] is None and out["ceiling_verdict"] == "reported"
    assert out["ceiling_probe"] == {}


def test_a_failing_rank_stops_every_rank_within_seconds(tmp_path) -> None:
    import openpyxl

    start = time.monotonic()
    book = tmp_path / "failed.xlsx"
    result = _invoke("--tensor-parallel-size", "2", "--output-tokens", "4", "--runtime-peak",
                     "12.5MiB", "--no-probe", "--inject-oom", "1:declared_load", "--json",
                     "--xlsx", str(book))
    elapsed = time.monotonic() - start
    assert result.exit_code == 1, result.output
    assert elapsed < 30, f"took {elapsed:.1f} s"
    out = json.loads(result.stdout)
    assert out["violations"] == ["out_of_memory_declared_load"]
    assert out["lines"][0]["detail"].startswith("rank 1: out of memory during the declared load")
    assert result.stderr.count("violated:") == 1
    rows = list(openpyxl.load_workbook(book)["Verification"].iter_rows(values_only=True))
    assert rows[1][0] == "out_of_memory_declared_load" and rows[1][4] == "violated"


def test_bad_input_found_on_the_ranks_is_one_line() -> None:
    result = _invoke("--tensor-parallel-size", "2", "--device-memory", "200KiB")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "leave no room for one KV block" in result.stderr


def test_a_rank_that_dies_after_writing_its_measurement_does_not_fail_the_run(tmp_path) -> None:
    """gloo can abort a rank in its teardown ('terminate called without an active exception')
    after the rank wrote what it measured: the run stands on the files; a rank that wrote a
    failure, or nothing, fails it."""
    import pickle

    from servecap.runtime.verify_parallel import _all_measured

    for rank in range(2):
        (tmp_path / f"rank{rank}.pkl").write_bytes(pickle.dumps({"rank": rank}))
    assert _all_measured(tmp_path, 2)
    (tmp_path / "rank1.pkl").write_bytes(pickle.dumps(("failed", "rank 1 failed")))
    assert not _all_measured(tmp_path, 2)
    (tmp_path / "rank1.pkl").unlink()
    assert not _all_measured(tmp_path, 2)


def test_a_probe_that_ran_out_of_memory_measured_no_ceiling(tmp_path) -> None:
    """A 6 MiB runtime budget on tiny-llama's 16 MiB: the plan gives the pool room for 63
    requests, and with 63 resident the probe's transients ask more than the device has left.
    The ceiling is then not measured and violated (it read 'ok, equal' at 63), the peak
    held stays within the device (it read 21.66 MiB: the refused bytes summed in), and the
    calibration sweep after it, which fits, is no failure (it inherited the probe's peak)."""
    import openpyxl

    book = tmp_path / "oom.xlsx"
    result = _invoke("--runtime-peak", "6MiB", "--json", "--xlsx", str(book))
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["violations"] == ["out_of_memory_ceiling_probe", "memory_ceiling"]
    assert out["ceiling_verdict"] == "violated" and out["measured_ceiling_requests"] is None
    assert out["ceiling_detail"].startswith("not measured: the ceiling probe ran out of memory")
    probe = out["ceiling_probe"]
    assert probe["out_of_memory"] and probe["refused_bytes"] > 0
    peak = next(p for p in out["phases"] if p["phase"] == "peak")
    assert peak["peak_tensor_bytes"] <= out["device_bytes"] == 16 * 2**20
    safety = next(line for line in out["lines"] if line["line"] == "safety")
    assert safety["measured_bytes"] == out["device_bytes"] - peak["peak_tensor_bytes"]
    assert "memory_ceiling (not measured" in result.stderr
    rows = list(openpyxl.load_workbook(book)["Verification"].iter_rows(values_only=True))
    ceiling = next(row for row in rows if row[0] == "memory_ceiling_requests")
    assert ceiling[2] is None and ceiling[4] == "violated"


def test_a_failure_row_keeps_its_tolerance_and_prints_its_account_below() -> None:
    """At 80 columns the warm-up's out-of-memory row took 12 wrapped lines of the tolerance
    column; the column holds the rule, as JSON's tolerance does, the account a line below."""
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, [
        "verify", "tiny-llama", "--device", "cpu", "--runtime-peak", "32KiB", "--safety", "0B",
        "--output-tokens", "2", "--no-probe"])
    assert result.exit_code == 1, result.output
    table, _, below = result.stdout.partition("└")
    assert "must not" in table and "emulated device" not in table  # "happen" may wrap
    assert next(line for line in below.splitlines() if "out_of_memory_warmup:" in line) \
        .startswith("out_of_memory_warmup: out of memory during warm-up: emulated device")
