"""`servecap load` against a server that misbehaves in each way seen in the field: every bad
answer is counted under its named kind, the report and the records are written, the exit
code is the documented one (0: something completed, 1: nothing did), never a traceback."""

import csv
import json
import os
import subprocess
import sys

import pytest
from garbage_server import GOOD_TOKENS, GarbageServer

pytest.importorskip("aiohttp")
NUM = 6


@pytest.fixture(scope="module")
def garbage():
    srv = GarbageServer()
    yield srv
    srv.stop()


def _load(tmp_path, url: str, *extra: str, num: int = NUM) -> tuple[int, dict, str, list]:
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{i * 0.01:.2f},8,{GOOD_TOKENS}\n" for i in range(num)))
    records = tmp_path / "records.csv"
    out = subprocess.run([sys.executable, "-m", "servecap.cli", "load", url, "--model", "m",
                          "--trace", str(trace), "--records", str(records), "--json",
                          "--timeout", "20s", "--force", *extra], capture_output=True,
                         text=True, timeout=120, env=os.environ | {"COLUMNS": "100"})
    assert "Traceback" not in out.stderr, out.stderr
    with records.open() as handle:
        rows = list(csv.DictReader(handle))
    return out.returncode, json.loads(out.stdout), out.stderr, rows


@pytest.mark.parametrize(("mode", "kind"), [
    ("not_json", "bad_json"),
    ("number", "bad_schema"),
    ("choices_strings", "bad_schema"),
    ("usage_no_completion_tokens", "bad_schema"),
    ("usage_tokens_text", "bad_schema"),
    ("text_a_number", "bad_schema"),
    ("bad_utf8_event", "bad_encoding"),
    ("http500_bad_utf8", "http_error"),
    ("error_event", "stream_error"),
    ("no_done", "stream_error"),
    ("endless_line", "bad_sse"),
    ("close_mid_stream", "connection_error"),
    ("not_http", "bad_response"),
])
def test_each_misbehaviour_is_counted_by_name(garbage, tmp_path, mode, kind) -> None:
    code, report, stderr, rows = _load(tmp_path, garbage.url(mode))
    assert code == 1 and "no request completed" in stderr  # the documented exit: none did
    assert report["offered"] == NUM and report["completed"] == 0
    assert report["errors"] == {kind: NUM}, report["errors"]
    assert len(rows) == NUM and all(r["state"] == "rejected" for r in rows)
    assert all(r["reason"].startswith(kind + ":") for r in rows), rows[0]["reason"]


def test_one_bad_line_among_20_loses_only_itself(garbage, tmp_path) -> None:
    code, report, _, rows = _load(tmp_path, garbage.url("one_bad_in_20"), "--concurrency",
                                  "1", num=20)
    assert code == 0
    assert report["completed"] == 19 and report["errors"] == {"bad_json": 1}
    assert sum(r["state"] == "completed" for r in rows) == 19
    assert report["ttft_ms"]["p50"] is not None


def test_a_metrics_body_with_blank_and_broken_lines_is_read_around(garbage, tmp_path) -> None:
    code, report, _, _ = _load(tmp_path, garbage.url("ok"), "--metrics",
                               f"http://127.0.0.1:{garbage.port}/ok/metrics")
    assert code == 0 and report["completed"] == NUM
    scraped = report["server_metrics"]
    assert scraped["num_failures"] == 0 and scraped["num_samples"] >= 1
    assert scraped["peak_running"] == 3 and scraped["peak_waiting"] == 2
    assert scraped["peak_kv_usage"] is None  # 'abc' and NaN are no usage


def test_without_model_a_server_of_several_models_is_one_line_listing_them(garbage, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,4\n")
    out = subprocess.run([sys.executable, "-m", "servecap.cli", "load",
                          garbage.url("llama-a+qwen-b"), "--trace", str(trace)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--model" in lines[0] and "llama-a, qwen-b" in lines[0]
