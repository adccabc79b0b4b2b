"""`servecap verify` as a person at a terminal sees it: a progress bar for each phase, and none of
the profiler's own lines; piped or with --json, no bar at all. The real entry point, run in a
pseudo-terminal and in pipes."""

import os
import pty
import re
import subprocess
import sys
import threading

import pytest

pytest.importorskip("torch")

COMMAND = [sys.executable, "-m", "servecap.cli", "verify", "tiny-llama", "--device", "cpu"]
ENV = {**os.environ, "COLUMNS": "100", "TERM": "xterm-256color"}
PHASES = ("loading the weights", "warm-up", "declared load (requests)",
          "ceiling probe (requests)")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _in_a_terminal(args: list[str]) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal; everything it wrote, escapes removed."""
    leader, follower = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the follower closed: the process is gone
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
                               env=ENV)
    os.close(follower)
    code = process.wait(timeout=300)
    reader.join(timeout=10)
    os.close(leader)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def test_a_terminal_sees_each_phase_move_and_no_profiler_lines() -> None:
    code, text = _in_a_terminal(COMMAND)
    assert code == 0, text[-2000:]
    for phase in PHASES:
        assert phase in text, phase
    assert re.search(r"declared load \(requests\)\s+\S+\s+4/4", text), "the 4 declared requests"
    assert re.search(r"ceiling probe \(requests\)\s+\S+\s+17/17", text), "15 + 2 probe requests"
    assert "USDT" not in text and "profiler_start" not in text
    assert "every ledger line held on this device" in text


def test_piped_or_json_output_has_no_bar_and_no_profiler_lines() -> None:
    for extra in ((), ("--json",)):
        run = subprocess.run([*COMMAND, *extra], capture_output=True, text=True, env=ENV,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        assert run.stderr == "", run.stderr  # no bar, no 'USDT ... profiler_start'
        assert not any(phase in run.stdout for phase in PHASES)
