"""`servecap load`'s report at 80 and 200 columns against a real `servecap serve`: nothing is
cut with an ellipsis, and the HTTP statuses read '200: 6', not a Python dict."""

import os
import subprocess
import sys

import pytest

TRACE = "arrival_s,prompt_tokens,output_tokens\n0.0,20,8\n0.02,40,12\n0.05,10,5\n0.1,30,6\n"


@pytest.mark.parametrize("width", [80, 200])
def test_the_load_report_cuts_nothing(server, tmp_path, width) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    env = os.environ | {"COLUMNS": str(width), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "servecap.cli", "load", server.url + "/v1",
                          "--model", "tiny-llama", "--trace", str(trace)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "…" not in run.stdout
    assert "HTTP 200: 4;" in run.stdout and "{" not in run.stdout
    assert all(len(line) <= width for line in run.stdout.splitlines() if line[:1] in "┏┃│└")
