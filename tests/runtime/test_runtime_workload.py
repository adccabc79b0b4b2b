"""Simulator requests become engine arrivals: same lengths and times, shared prefixes shared."""

import pytest

from servecap.ledger.errors import SpecError
from servecap.runtime.workload import arrivals_from_requests, load_arrivals
from servecap.sim.sampling import Request


def test_lengths_times_and_shared_prefixes_carry_over() -> None:
    offered = [Request(0, 0.0, 40, 5, "system", 32), Request(1, 0.5, 50, 7, "system", 32),
               Request(2, 0.7, 20, 3)]
    arrivals = arrivals_from_requests(offered, vocab_size=256, seed=7)
    assert [(a.arrival_s, len(a.prompt_tokens), a.output_tokens) for a in arrivals] == [
        (0.0, 40, 5), (0.5, 50, 7), (0.7, 20, 3)]
    first, second, third = (a.prompt_tokens for a in arrivals)
    assert first[:32] == second[:32]  # the group's prefix is the same tokens
    assert first[32:] != second[32:8 + 32]
    assert third[:20] != first[:20]
    assert all(0 <= t < 256 for t in first + second + third)
    assert arrivals == arrivals_from_requests(offered, vocab_size=256, seed=7)


def test_a_missing_workload_file_is_named(tmp_path) -> None:
    pytest.importorskip("servecap.sim.workload")
    with pytest.raises(SpecError, match="cannot be read"):
        load_arrivals(tmp_path / "absent.yaml", 256)


def test_a_workload_file_drives_verify(tmp_path) -> None:
    pytest.importorskip("servecap.sim.workload")
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app

    path = tmp_path / "small.yaml"
    path.write_text("name: small\nseed: 3\nnum_requests: 6\narrivals: {kind: poisson, "
                    "rate_per_s: 1000}\nprompt_tokens: {kind: uniform, low: 20, high: 120}\n"
                    "output_tokens: {kind: fixed, value: 4}\n")
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--workload", str(path), "--json"])
    out = json.loads(result.stdout)
    assert out["latency"]["num_finished"] == 6
    assert out["record"]["workload"].startswith("small")
    kv = next(line for line in out["lines"] if line["line"] == "kv_cache")
    assert kv["verdict"] == "ok" and kv["measured_bytes"] <= kv["predicted_bytes"]


def test_verify_trace_and_workload_refuse_devices_and_aliases(tmp_path) -> None:
    """verify's --trace and --workload go through the untrusted-input reader simulate uses:
    /dev/zero once read until the process was killed for memory."""
    pytest.importorskip("servecap.sim.workload")
    from servecap.runtime.workload import load_trace

    with pytest.raises(SpecError, match="regular file"):
        load_trace("/dev/zero", 256)
    with pytest.raises(SpecError, match="regular file"):
        load_arrivals("/dev/zero", 256)
    bomb = tmp_path / "alias.yaml"
    bomb.write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(SpecError, match="aliases"):
        load_arrivals(bomb, 256)
    with pytest.raises(SpecError, match="cannot be read"):
        load_trace(tmp_path / "absent.csv", 256)
