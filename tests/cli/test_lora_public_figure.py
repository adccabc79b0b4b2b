"""LoRA slots against a public figure: vllm issue 14450 (tests/fixtures/lora/vllm-14450.yaml,
its SOURCE there). On V0's memory_profiling releases (0.6.5 - 0.7.x) the number of KV cache
blocks does not change with --max-loras or --max-lora-rank, the slots sitting outside
gpu_memory_utilization; from 0.8.0 (PR 14469, and V1 throughout) the pool is what the slots
leave. Both as plan --json prints them, lines that add up to the device."""

import json
from pathlib import Path

import pytest
import yaml

FIGURE = yaml.safe_load((Path(__file__).resolve().parents[1] / "fixtures" / "lora" /
                         "vllm-14450.yaml").read_text())


def planned(run, version: str, knobs: tuple[int, int] | None) -> dict:
    lora = [] if knobs is None else ["--enable-lora", "--max-loras", str(knobs[0]),
                                     "--max-lora-rank", str(knobs[1])]
    result = run("plan", FIGURE["model"], "--device", FIGURE["device"], "--engine",
                 f"vllm=={version}", "--context", str(FIGURE["max_model_len"]), *lora,
                 "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("version", FIGURE["unchanged_blocks"])
def test_v0_memory_profiling_releases_keep_their_blocks_whatever_the_slots(run, version):
    without = planned(run, version, None)
    for knobs in map(tuple, FIGURE["knobs"]):
        out = planned(run, version, knobs)
        assert out["lora_bytes"] > 0
        assert out["num_gpu_blocks"] == without["num_gpu_blocks"], knobs
        # the slots are held outside the budget: the headroom shrinks by them
        assert without["safety_bytes"] - out["safety_bytes"] == out["lora_bytes"]
        assert out["committed_bytes"] + out["free_bytes"] == out["device_bytes"]


@pytest.mark.parametrize("version", FIGURE["fewer_blocks"])
def test_releases_whose_profile_holds_the_slots_size_the_pool_after_them(run, version):
    without = planned(run, version, None)
    blocks = [planned(run, version, tuple(k))["num_gpu_blocks"] for k in FIGURE["knobs"]]
    assert without["num_gpu_blocks"] > blocks[0] > blocks[1] > blocks[2]
    out = planned(run, version, tuple(FIGURE["knobs"][1]))
    assert out["safety_bytes"] == without["safety_bytes"]  # the headroom stays the release's
    lost = without["kv_pool_bytes"] - out["kv_pool_bytes"]
    assert lost == out["lora_bytes"]
