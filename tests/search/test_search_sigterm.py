"""SIGTERM stops a search as Ctrl-C does: exit 130, the layouts that finished printed as valid
JSON, and the workers end quietly (no BrokenPipeError tracebacks, no leaked semaphores)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHAT = str(Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml")
# 40 req/s: most layouts saturate, so each runs to its --num-requests ceiling and the search
# is still simulating when the signal comes (at 4 req/s every run is steady within seconds)
ARGS = ["search", "llama-3.1-8b", "--workload", CHAT, "--rate", "40", "--slo-ttft", "1s",
        "--slo-tpot", "50ms", "--devices", "l4-24gb,a100-80gb,h100-80gb", "--max-gpus", "4",
        "--num-requests", "20000", "--workers", "2", "--no-capacity", "--json"]


def _wait_for_pool(proc: subprocess.Popen, limit_s: float = 180) -> None:
    """Until the search has started its pool (its forkserver is a child): imports and planning
    take 5 s on a quiet machine and far longer on a fresh clone under load, and a signal before
    the search has begun ends the process with nothing to print."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "servecap exited before its search started"
        if children.read_text().split():
            return
        time.sleep(0.1)
    pytest.fail(f"no worker pool after {limit_s:.0f} s")


@pytest.mark.parametrize("whole_group", [False, True])
def test_sigterm_prints_what_finished_and_exits_130(whole_group: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "servecap.cli", *ARGS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env=os.environ | {"OMP_NUM_THREADS": "1"})
    _wait_for_pool(proc)
    time.sleep(2)  # the workers started and simulating
    assert proc.poll() is None, "the search finished before it could be interrupted"
    if whole_group:  # as a job scheduler or a terminal's hang-up signals every process
        os.killpg(proc.pid, signal.SIGTERM)
    else:  # as `kill PID` or `timeout`
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert "leaked" not in err, err
    report = json.loads(out)
    assert report["interrupted"] is True
    space = report["space"]
    assert 0 <= space["batches_finished"] < space["num_batches"]
    assert err.strip().splitlines()[-1].startswith("servecap: error: interrupted:")
