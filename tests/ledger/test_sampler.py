"""The sampler's bytes per sampling request per step: which path each release takes, when a
server's generation_config defaults apply, and the derived cost against the one published
sweep that shows it (the ai.wmx.dev L4 sweep's ITL slope)."""

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from servecap.ledger.devices import find
from servecap.ledger.sampler import (
    NONE,
    defaults_apply,
    filter_path,
    has_penalties,
    sampler_bytes_per_request,
    samples,
)
from servecap.ledger.vllm_row import FLASHINFER, MRV2, TORCH, TRITON
from servecap.ledger.vllm_versions import row

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests/fixtures/configs"
# the L4's bandwidth share (sim/efficiency.py DERATED: the L40S's measured share)
L4_BANDWIDTH_SHARE = 0.802
WMX = ROOT / "tests/fixtures/vllm_bench/wmx_vllm023_l4.json"


def _gc(model: str) -> dict:
    return json.loads((CONFIGS / model / "generation_config.json").read_text())


def test_paths_are_the_memory_ledgers_per_release():
    assert filter_path(row("0.15.0"), 20, 0.95) == TORCH
    assert filter_path(row("0.19.0"), 20, 0.95, batch=4) == TORCH
    assert filter_path(row("0.19.0"), 20, 0.95, batch=8) == TRITON
    assert filter_path(row("0.21.0"), 20, 0.95, batch=1) == FLASHINFER
    assert filter_path(row("0.23.0"), 0, 1.0) == NONE
    assert filter_path(row("0.23.0"), 20, 0.8, runner_sampler=MRV2) == MRV2
    assert sampler_bytes_per_request(151_936, MRV2, True) == 0


def test_defaults_apply_from_080_and_only_without_a_client_temperature():
    assert not defaults_apply((0, 7, 1), False)
    assert defaults_apply((0, 8, 0), False)
    assert not defaults_apply((0, 23, 0), True)


def test_generation_config_fixtures():
    qwen25 = _gc("Qwen--Qwen2.5-0.5B-Instruct")
    assert samples(qwen25) and has_penalties(qwen25)
    qwen3 = _gc("Qwen--Qwen3-0.6B")
    assert samples(qwen3) and not has_penalties(qwen3)
    gptoss = _gc("openai--gpt-oss-20b")
    assert samples(gptoss) and not has_penalties(gptoss)
    assert filter_path(row("0.19.1"), int(gptoss.get("top_k", 0)),
                       float(gptoss.get("top_p", 1.0))) == NONE
    assert not samples({"temperature": 0.0})


def test_l4_sweep_slope_is_the_derived_cost():
    """The L4 sweep (vLLM 0.23.0, Qwen2.5-0.5B-Instruct, vllm bench serve sends no temperature)
    grows its ITL by about 65 us per request in flight (5.1 ms at 1 to 7.1 ms at 32); the
    FlashInfer path with the model's repetition penalty, priced at the L4's bandwidth, comes
    within 40 % of that slope (derived, not fitted)."""
    runs = {r["load"]["concurrency"]: r["measured"]["median_itl_ms"]
            for g in json.loads(WMX.read_text())["groups"] for r in g["runs"]}
    slope_s = (runs[32] - runs[1]) / 31 * 1e-3
    gc = _gc("Qwen--Qwen2.5-0.5B-Instruct")
    vocab = json.loads((CONFIGS / "Qwen--Qwen2.5-0.5B-Instruct/config.json").read_text())[
        "vocab_size"]
    path = filter_path(row("0.23.0"), gc["top_k"], gc["top_p"])
    derived_s = sampler_bytes_per_request(vocab, path, has_penalties(gc)) / (
        find("l4-24gb").bandwidth_bytes_per_s * L4_BANDWIDTH_SHARE)
    assert path == FLASHINFER
    assert 0.6 * slope_s < derived_s < 1.4 * slope_s


@given(st.integers(1000, 300_000), st.sampled_from([NONE, TORCH, TRITON, FLASHINFER]))
def test_bytes_grow_with_the_vocabulary_and_penalties_add(vocab, path):
    plain = sampler_bytes_per_request(vocab, path, False)
    assert sampler_bytes_per_request(vocab + 1000, path, False) > plain
    assert sampler_bytes_per_request(vocab, path, True) > plain
    assert sampler_bytes_per_request(vocab, TORCH, False) >= sampler_bytes_per_request(
        vocab, TRITON, False)
