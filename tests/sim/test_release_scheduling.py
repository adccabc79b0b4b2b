"""What each vLLM release 0.8 - 0.33 does in scheduling (sim/vllm_releases.py): async
scheduling's default, CUDA-graph mode, batch-limit defaults; and what simulate says of it."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.devices import find
from servecap.sim.vllm_releases import (
    ABSENT,
    DEFAULT_ON,
    FULL_AND_PIECEWISE,
    NEWEST_READ,
    OPT_IN,
    PIECEWISE,
    RELEASES,
    batch_limits,
    graph_max,
    overlap,
    scheduling_for,
    table_rows,
)


@pytest.mark.parametrize(("version", "mode", "graphs"), [
    ((0, 8, 0), ABSENT, PIECEWISE), ((0, 9, 2), ABSENT, PIECEWISE),
    ((0, 10, 0), OPT_IN, PIECEWISE), ((0, 10, 2), OPT_IN, PIECEWISE),
    ((0, 11, 0), OPT_IN, FULL_AND_PIECEWISE), ((0, 13, 0), OPT_IN, FULL_AND_PIECEWISE),
    ((0, 14, 0), DEFAULT_ON, FULL_AND_PIECEWISE), ((0, 15, 1), DEFAULT_ON, FULL_AND_PIECEWISE),
    ((0, 21, 0), DEFAULT_ON, FULL_AND_PIECEWISE), ((0, 32, 0), DEFAULT_ON, FULL_AND_PIECEWISE),
    ((0, 33, 0), DEFAULT_ON, FULL_AND_PIECEWISE)])
def test_each_release_has_its_async_default_and_graph_mode(version, mode, graphs) -> None:
    row = scheduling_for(version)
    assert (row.async_scheduling, row.cudagraph_mode) == (mode, graphs)
    assert row.version <= version and row.tag.startswith("v") and "vllm/" in row.source


def test_every_release_0_8_to_0_33_has_a_row_and_v0_none() -> None:
    assert scheduling_for((0, 7, 3)) is None and scheduling_for((0, 6, 0)) is None
    for minor in range(8, 34):
        assert scheduling_for((0, minor)) is not None
    assert NEWEST_READ == (0, 33, 0)
    assert [r.version for r in RELEASES] == sorted(r.version for r in RELEASES)
    assert len(table_rows()) == len(RELEASES)


def test_overlap_follows_the_default_the_flag_and_pipeline_parallel() -> None:
    on, off = scheduling_for((0, 14)), scheduling_for((0, 13))
    assert overlap(on, None).overlap and not overlap(off, None).overlap
    assert "v0.14.0 default" in overlap(on, None).why and "vllm/config" in overlap(on, None).why
    assert not overlap(on, False).overlap and overlap(off, True).overlap
    # 0.14.0 turned its default off under pipeline parallel; 0.15's default branch does not
    assert not overlap(on, None, pipeline_parallel_size=2).overlap
    assert "pipeline" in overlap(on, None, pipeline_parallel_size=2).why
    assert overlap(scheduling_for((0, 15)), None, pipeline_parallel_size=2).overlap


@pytest.mark.parametrize(("version", "overlaps"), [
    ((0, 14, 0), False), ((0, 21, 0), False), ((0, 27, 0), False),  # 'draft_model' turns it off
    ((0, 28, 0), True), ((0, 33, 0), True)])  # kept on with a draft model from 0.28
def test_a_draft_model_turns_the_default_off_where_the_release_does(version, overlaps) -> None:
    got = overlap(scheduling_for(version), None, draft_model=True)
    assert got.overlap == overlaps
    assert ("draft model" in got.why) == (not overlaps)


@pytest.mark.parametrize(("version", "device", "offline", "tokens", "seqs"), [
    ((0, 8, 0), "a100-80gb", False, 2048, 1024),  # every GPU got 1024 sequences in 0.8.0
    ((0, 8, 0), "h100-80gb", False, 8192, 1024),  # 'h100' in the name
    ((0, 8, 4), "a100-80gb", False, 2048, 256),
    ((0, 8, 5), "a100-80gb", False, 8192, 1024),  # >= 70 GiB, A100 not yet excluded
    ((0, 9, 0), "a100-80gb", False, 2048, 256),  # PR #17885 excludes the A100
    ((0, 11, 0), "h100-80gb", False, 8192, 1024), ((0, 11, 0), "h100-80gb", True, 16384, 1024),
    ((0, 11, 0), "l4-24gb", False, 2048, 256), ((0, 11, 0), "l4-24gb", True, 8192, 256),
    ((0, 27, 0), "b200-180gb", False, 8192, 1024),
    ((0, 28, 0), "b200-180gb", False, 16384, 1024),  # >= 160 GiB from 0.28
    ((0, 28, 0), "h200-141gb", False, 8192, 1024)])
def test_batch_defaults_follow_the_release_and_the_device(version, device, offline, tokens,
                                                          seqs) -> None:
    dev = find(device)
    limits = batch_limits(version, dev.usable_bytes, dev.label, offline)
    assert (limits.tokens, limits.seqs) == (tokens, seqs)
    assert "arg_utils.py" in limits.why


def test_graph_sizes_cap_at_twice_the_sequences_and_1024_on_blackwell_from_0_28() -> None:
    assert graph_max(scheduling_for((0, 21)), "NVIDIA H100 80GB HBM3", 1024) == 512
    assert graph_max(scheduling_for((0, 21)), "NVIDIA H100 80GB HBM3", 64) == 128
    assert graph_max(scheduling_for((0, 28)), "NVIDIA B200", 1024) == 1024
    assert graph_max(scheduling_for((0, 27)), "NVIDIA B200", 1024) == 512


def _json(*args) -> dict:
    out = CliRunner().invoke(app, ["simulate", "llama-3.1-8b", "--device", "h100-80gb",
                                   "--input-len", "128", "--output-len", "8", "--num-requests",
                                   "8", "--json", *args])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


@pytest.mark.parametrize(("engine", "overlaps"), [
    (f"vllm==0.{minor}", minor >= 14) for minor in range(8, 34)] + [
    ("vllm==0.8.5", False), ("vllm==0.10.2", False)])
def test_simulate_says_whether_host_and_gpu_overlap_citing_the_source(engine, overlaps) -> None:
    report = _json("--engine", engine)
    label = report["engine"]
    assert label["host_gpu_overlap"] is overlaps
    assert "vllm/config" in label["overlap_why"] and label["scheduling"]["source"]
    assert report["coefficients"]["cpu_overlap"] == (1.0 if overlaps else 0.0)


def test_the_flags_override_the_default_and_a_release_without_the_option_refuses_it() -> None:
    assert not _json("--engine", "vllm==0.15", "--no-async-scheduling")["engine"][
        "host_gpu_overlap"]
    assert _json("--engine", "vllm==0.11", "--async-scheduling")["engine"]["host_gpu_overlap"]
    out = CliRunner().invoke(app, ["simulate", "llama-3.1-8b", "--device", "h100-80gb",
                                   "--input-len", "128", "--output-len", "8", "--engine",
                                   "vllm==0.9", "--async-scheduling"])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
    assert "vLLM 0.9 has no async scheduling" in out.output
