"""A reader that closes the pipe early (`servecap plan ... | head -1`) does not change the exit
code: click exited 1 on the broken pipe, which in servecap's codes means 'does not fit'. The
rest of the output is dropped quietly (the Python docs' note on SIGPIPE, signal module) and
the command exits as it would have: 0 when the load fits, 1 when it does not."""

import subprocess
import sys

import pytest


def _closed_early(*args: str) -> subprocess.CompletedProcess:
    """Run servecap with its stdout a pipe whose reader is gone before the first byte."""
    proc = subprocess.Popen([sys.executable, "-m", "servecap.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves first: every write meets EPIPE
    err = proc.stderr.read()
    proc.wait(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, b"", err)


@pytest.mark.parametrize(("args", "code"), [
    (("plan", "teaching-7b"), 0),                      # fits: 39 requests
    (("plan", "teaching-7b", "--json"), 0),
    (("plan", "teaching-7b", "--device", "1GiB"), 1),  # 7B bf16 weights exceed 1 GiB
    (("models",), 0),                                  # a long table, several writes
])
def test_a_closed_pipe_keeps_the_commands_exit_code(args, code) -> None:
    done = _closed_early(*args)
    assert done.returncode == code, done.stderr
    assert done.stderr == b""


def test_an_error_into_a_closed_pipe_still_exits_2() -> None:
    """`servecap plan nope 2>&1 | head -0`: the error line meets the closed pipe too."""
    proc = subprocess.Popen([sys.executable, "-m", "servecap.cli", "plan", "teaching-7b",
                             "--context", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc.stdout.close()
    assert proc.wait(timeout=120) == 2


def test_help_and_version_into_a_closed_pipe_exit_0() -> None:
    for args in (("plan", "--help"), ("--help",), ("--version",)):
        done = _closed_early(*args)
        assert (done.returncode, done.stderr) == (0, b""), args
