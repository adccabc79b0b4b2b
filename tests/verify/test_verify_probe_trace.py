"""The ceiling probe measures memory, not throughput; a trace replays on the runtime and its
records are simulate's, row for row."""

import csv
import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.runtime.ceiling_probe import probe_output_tokens
from servecap.sim.records import RECORD_COLUMNS, TOKEN_COLUMNS


def _json(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu", "--json",
                                      *args])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_small_step_budget_does_not_throttle_the_probe(dtype: str) -> None:
    # 64 tokens a step, 256-token requests: admitting the probe's 17 takes ~70 steps, far
    # more than the declared 8 output tokens; the probe lengthens its outputs so none
    # finishes before then (with 8, only ~9 were ever resident at once)
    code, out = _json("--max-num-batched-tokens", "64", "--output-tokens", "8",
                      "--concurrency", "1",
                      "--weight-dtype", dtype, "--kv-dtype", dtype)
    assert code == 0, out["violations"]
    assert out["measured_ceiling_requests"] == out["predicted_ceiling_requests"]
    assert out["ceiling_probe"]["limited_by"] == "KV blocks"
    assert out["ceiling_probe"]["num_finished"] == out["ceiling_probe"]["num_requests"]
    assert out["ceiling_probe"]["output_tokens"] > 70


def test_probe_outputs_outlast_admission() -> None:
    assert probe_output_tokens(17, 256, 8192, 16) == 16  # budget ample: the declared output
    assert probe_output_tokens(17, 256, 64, 2) == -(-17 * 256 // 47) + 2
    assert probe_output_tokens(500, 256, 64, 2) == 255  # never the whole context


def _trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n"
                    "0.0,40,3\n0.05,24,2\n0.12,60,4\n0.2,8,3\n")
    return path


def test_trace_replay_records_arrive_as_the_trace_says(tmp_path) -> None:
    records, tokens = tmp_path / "records.csv", tmp_path / "tokens.csv"
    code, out = _json("--trace", str(_trace(tmp_path)), "--no-probe", "--records",
                      str(records), "--token-times", str(tokens))
    assert code == 0, out["violations"]
    rows = list(csv.DictReader(records.open()))
    assert tuple(rows[0]) == RECORD_COLUMNS
    assert [float(r["arrival_s"]) for r in rows] == [0.0, 0.05, 0.12, 0.2]
    for row in rows:
        assert row["state"] == "completed"
        assert float(row["first_token_s"]) >= float(row["arrival_s"])
        ttft = (float(row["first_token_s"]) - float(row["arrival_s"])) * 1000
        assert float(row["ttft_ms"]) == pytest.approx(ttft, abs=2e-3)
    token_rows = list(csv.DictReader(tokens.open()))
    assert tuple(token_rows[0]) == TOKEN_COLUMNS
    assert len(token_rows) == 3 + 2 + 4 + 3
    assert out["latency"]["num_finished"] == 4
    assert out["calibration"]["steps"], "the declared load's step samples"
    assert set(out["calibration"]["steps"][0]) == {
        "duration_s", "num_prefill_tokens", "num_decode_tokens", "prefill_attention_tokens",
        "decode_context_tokens", "num_seqs"}


def test_records_are_not_overwritten_without_force(tmp_path) -> None:
    records = tmp_path / "records.csv"
    records.write_text("keep\n")
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu", "--trace",
                                      str(_trace(tmp_path)), "--records", str(records)])
    assert result.exit_code == 2 and "--force" in result.stderr
    assert records.read_text() == "keep\n"


def test_a_trace_request_the_pool_cannot_hold_says_why(tmp_path) -> None:
    """The engine's rejection reason reaches the violation, and a trace is not called the
    declared load."""
    path = tmp_path / "long.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,5000,3\n")
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu", "--trace",
                                      str(path), "--no-probe", "--no-realtime"])
    assert result.exit_code == 1
    assert "of the replayed load did not finish; first: needs 313 KV blocks" in result.stderr


def test_records_count_prefill_chunks_as_simulate_does(tmp_path) -> None:
    """prefill_chunks was 0 in every verify row (simulate's rows say 1 for a prompt prefilled
    in one pass), so the two files did not diff row by row."""
    records = tmp_path / "records.csv"
    code, out = _json("--trace", str(_trace(tmp_path)), "--no-probe", "--no-realtime",
                      "--max-num-batched-tokens", "16", "--records", str(records))
    assert code == 0, out["violations"]
    rows = list(csv.DictReader(records.open()))
    for row in rows:  # 16 tokens a step: at least ceil(prompt / 16) passes, decodes not counted
        chunks, prompt = int(row["prefill_chunks"]), int(row["prompt_tokens"])
        assert -(-prompt // 16) <= chunks < prompt
    code, out = _json("--trace", str(_trace(tmp_path)), "--no-probe", "--no-realtime",
                      "--records", str(records), "--force")
    assert [int(r["prefill_chunks"]) for r in csv.DictReader(records.open())] == [1, 1, 1, 1]
