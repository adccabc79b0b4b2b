"""verify's work is bounded: flags that would make it run for ever are refused with one line,
every allocation-counting profiler session closes (also on errors, and while folding during a
long run), and 1-token blocks do not let random prompts share blocks the ledger never plans."""

import json

import pytest
import torch
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.runtime.telemetry import AllocatorCounter


def _verify(*args: str):
    return CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu", *args])


@pytest.mark.parametrize(("args", "needle"), [
    (("--max-num-seqs", "0"), "--max-num-seqs = 0"),
    (("--max-num-seqs", "-3"), "--max-num-seqs = -3"),
    (("--max-num-seqs", "10000000"), "--max-num-seqs = 10000000"),
    (("--max-num-batched-tokens", "1"), "at least one block (16 tokens"),
    (("--max-num-batched-tokens", "7", "--block-size", "8"), "at least one block (8 tokens"),
    (("--output-tokens", "5000"), "--output-tokens"),
])
def test_unbounded_work_is_refused_in_one_line(args, needle) -> None:
    result = _verify(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_every_profiler_session_closes() -> None:
    counter = AllocatorCounter()
    with counter:
        for _ in range(3 * AllocatorCounter.FOLD_EVERY_STEPS):
            torch.ones(1024).sum()
            counter.fold_every()
        assert torch.autograd._profiler_enabled()
    assert not torch.autograd._profiler_enabled() and counter.peak_bytes >= 4096
    with pytest.raises(ZeroDivisionError), counter:
        1 / 0  # noqa: B018 - the error is the point
    assert not torch.autograd._profiler_enabled()


def test_one_token_blocks_hold_the_planned_ceiling_exactly() -> None:
    """361 planned against 362 measured: random prompts from a 256-id vocabulary share their
    first 1-token block by chance, which the ledger (no shared prefix declared) never counts."""
    result = _verify("--block-size", "1", "--context", "256", "--device-memory", "64MiB",
                     "--no-realtime", "--json")
    report = json.loads(result.stdout)
    assert report["predicted_ceiling_requests"] == report["measured_ceiling_requests"] == 361
    assert report["ceiling_verdict"] == "ok" and result.exit_code == 0
