"""`servecap diff`: one deployment under two vLLM releases or two engines, figure by figure, each
change with the release rules behind it. The Gemma 4 case is vllm-project/vllm#49878's settings
(--max-model-len 262144 --max-num-batched-tokens 32768 --kv-cache-memory 52613349376, bf16 KV)
on Gemma-4-31B's architecture (tests/fixtures/configs/nvidia--Gemma-4-31B-IT-NVFP4, its
text_config; weights at fp8 as the thread's FP8-dynamic checkpoint)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GEMMA = str(CONFIGS / "nvidia--Gemma-4-31B-IT-NVFP4" / "config.json")
THREAD = ["--device", "rtx-pro-6000-96gb", "--weight-dtype", "fp8", "--context", "262144",
          "--max-num-batched-tokens", "32768", "--kv-cache-memory", "52613349376"]


def diff(*args: str, columns: int = 100):
    return CliRunner().invoke(app, ["diff", *args], env={"COLUMNS": str(columns)})


def as_json(*args: str) -> tuple[int, dict]:
    result = diff(*args, "--json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def figures(out: dict) -> dict[str, dict]:
    return {f["key"]: f for section in ("lines", "pool", "outcome") for f in out[section]}


def test_gemma_4_fails_to_start_after_0_26_for_its_sliding_windows() -> None:
    """60 layers: 50 sliding (16 KV heads x 256) and 10 full (4 x 512, K = V): pages of 16 x
    16,384 B and 32 x 8,192 B, one group of 10 full and five of 10 sliding; 49 GiB hold
    52,613,349,376 // 262,144 // 10 = 20,070 blocks. A request reserves 262,144 / 32 = 8,192
    full blocks and 5 x (cdiv(min(1,023 + T', L), 16) + 1) sliding ones: T' = 32,768 to 0.25
    (18,757 in all), 2 x 32,768 from 0.26 (28,997): more than the pool."""
    code, out = as_json(GEMMA, *THREAD, "--engine", "vllm==0.25.1", "--against", "vllm==0.26")
    got = figures(out)
    assert (out["a"]["release"], out["b"]["release"]) == ("v0.25.0", "v0.26.0")
    assert got["num_gpu_blocks"]["a"] == got["num_gpu_blocks"]["b"] == 20_070
    assert got["blocks_per_request"]["a"] == 8192 + 5 * (-(-(1023 + 32_768) // 16) + 1)
    assert got["blocks_per_request"]["b"] == 8192 + 5 * (-(-(1023 + 65_536) // 16) + 1)
    assert (got["blocks_per_request"]["a"], got["blocks_per_request"]["b"]) == (18_757, 28_997)
    assert got["starts"]["a"] is True and got["starts"]["b"] is False and code == 1
    why = got["blocks_per_request"]["reasons"]
    assert [r["release"] for r in why] == ["v0.26.0"]
    assert "windows reserve the batches in flight" in why[0]["rules"]
    assert "SlidingWindowSpec" in why[0]["source"] and "max_in_flight_tokens" in why[0]["source"]
    assert out["b"]["start_advice"].startswith("vLLM would refuse to start")
    assert got["weights"]["delta"] == 0 and got["weights"]["reasons"] == []


def test_every_line_of_both_sides_and_the_json_contract() -> None:
    """Llama-3.1-8B moves to Model Runner V2 at 0.23: its graphs are no longer subtracted and
    its profile sampler holds 6 B a logit, not FlashInfer's 10, so the forward of 8,192
    tokens (8,192 x (3 x 4,096 + 3 x 14,336) x 2 B) is the wider, and the V1 runner's
    sampler inputs (2 x 1,024 x 4,096 x 2 B) go: the pool gains all three. PyTorch's 32 MiB
    cuBLAS workspace (SM 9.0) is on both sides."""
    code, out = as_json("llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm==0.21",
                        "--against", "vllm==0.23")
    assert code == 0 and set(out) == {"model", "device", "device_bytes", "a", "b", "lines",
                                      "pool", "outcome"}
    assert (out["a"]["model_runner"], out["b"]["model_runner"]) == ("v1", "v2")
    got = figures(out)
    for item in got.values():
        assert set(item) == {"key", "label", "unit", "a", "b", "delta", "reasons", "from"}
        if item["unit"] != "bool":
            assert item["delta"] == round(item["b"] - item["a"], 2)
    plan = json.loads(CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--device", "h100-80gb",
                                               "--engine", "vllm==0.21", "--json"]).stdout)
    assert {line["key"] for line in plan["lines"]} <= {f["key"] for f in out["lines"]}
    assert all(isinstance(f["a"], int) for f in out["lines"])
    logits, hidden, inputs, cublas = 1024 * 128_256, 8192 * 4096 * 2, 2 * 1024 * 4096 * 2, 2**25
    runtime = (logits * 10 + hidden + inputs + cublas,
               max(8192 * (3 * 4096 + 3 * 14_336) * 2, logits * 6 + hidden) + cublas)
    assert (got["runtime_peak"]["a"], got["runtime_peak"]["b"]) == runtime
    assert got["cuda_graphs"]["b"] == 0
    assert got["kv_pool_bytes"]["delta"] == got["cuda_graphs"]["a"] + runtime[0] - runtime[1]
    assert "Model Runner V2" in got["cuda_graphs"]["reasons"][0]["rules"][0]


def test_same_rules_change_nothing() -> None:
    code, out = as_json("llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm==0.30",
                        "--against", "vllm==0.31")
    assert code == 0 and all(f["delta"] in (0, None) and not f["reasons"]
                             for f in figures(out).values())


def test_vllm_against_sglang_says_each_engines_rule_and_drops_the_others_knob() -> None:
    code, out = as_json("llama-3.1-8b", "--device", "h100-80gb",
                        "--engine", "vllm", "--gpu-memory-utilization", "0.85",
                        "--against", "sglang")
    got = figures(out)
    assert out["b"]["planned_without"] == ["--gpu-memory-utilization 0.85"]
    assert out["a"]["planned_without"] == [] and out["b"]["release"] is None
    pool = got["kv_pool_bytes"]
    assert pool["reasons"] == [] and "gpu_memory_utilization 0.85" in pool["from"]["a"]
    assert "mem_fraction_static" in pool["from"]["b"]


def test_the_table_at_80_columns_cuts_no_number() -> None:
    result = diff(GEMMA, *THREAD, "--engine", "vllm==0.25.1", "--against", "vllm==0.26",
                  columns=80)
    assert result.exit_code == 1 and "…" not in result.stdout
    assert "v0.26.0: windows reserve the batches in flight" in result.stdout
    assert "28,997" in result.stdout and "18,757" in result.stdout


@pytest.mark.parametrize(("args", "needle"), [
    (["llama-3.1-8b", "--device", "h100-80gb"], "--against is missing: required"),
    (["llama-3.1-8b", "--device", "h100-80gb", "--against", "tgi"], "--against = 'tgi'"),
    (["llama-3.1-8b", "--device", "h100-80gb", "--against", "vllm==banana"],
     "--against = 'vllm==banana'"),
])
def test_bad_input_is_one_line_exit_2(args, needle) -> None:
    result = diff(*args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and needle in result.output
