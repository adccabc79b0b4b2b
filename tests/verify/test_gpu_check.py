"""The prepared GPU check parses, and its Python pieces run on any machine with --dry-run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_check_script_parses_and_refuses_no_outdir() -> None:
    script = ROOT / "bench" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert result.returncode == 2 and "usage: bash bench/gpu_check.sh OUTDIR" in result.stderr


def _bench(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / name), *args],
                          capture_output=True, text=True, timeout=300)


def test_teaching_dry_run_writes_both_plans(tmp_path) -> None:
    out = tmp_path / "teaching.json"
    result = _bench("gpu_verify_teaching.py", "--dry-run", "--json-out", str(out))
    assert result.returncode == 0, result.stderr
    plans = json.loads(out.read_text())["plans"]
    assert plans["kv_bytes_per_token"] == 131_072  # 32 layers x 2 x 8 KV heads x 128 x 2 B
    assert plans["runtime_ceiling_requests"] == plans["seed_ceiling_requests"]


def test_decode_roofline_dry_run_writes_every_batch(tmp_path) -> None:
    out = tmp_path / "decode.json"
    result = _bench("gpu_decode_roofline.py", "--dry-run", "--batches", "1,2", "--json-out",
                    str(out))
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["results"]
    assert [r["batch"] for r in rows] == [1, 2]
    assert all(r["paged_tokens_per_s"] > 0 and r["roofline_tokens_per_s"] > 0 for r in rows)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_decode_roofline_without_cuda_says_so(tmp_path) -> None:
    result = _bench("gpu_decode_roofline.py", "--json-out", str(tmp_path / "x.json"))
    assert result.returncode == 1 and "no CUDA device here" in result.stderr


def test_hybrid_dry_run_plans_both_state_lines(tmp_path) -> None:
    """Nemotron-H-56B's first 8 blocks hold 4 Mamba-2 layers: each keeps a conv state of
    3 x (256 x 64 + 2 x 8 x 256) bf16 values and a 256 x 64 x 256 fp16 recurrent state."""
    out = tmp_path / "hybrid.json"
    result = _bench("gpu_verify_hybrid.py", "--dry-run", "--json-out", str(out))
    assert result.returncode == 0, result.stderr
    plans = json.loads(out.read_text())["plans"]
    per_layer = 3 * (256 * 64 + 2 * 8 * 256) * 2 + 256 * 64 * 256 * 2
    assert plans["nemotron_h_56b"]["state_bytes_per_request"] == 4 * per_layer
    assert plans["nemotron_h_56b"]["state_bytes_total"] == 8 * 4 * per_layer
    dense = plans["qwen3_next_dense"]  # 6 gated-DeltaNet layers of the first 8
    assert dense["state_bytes_per_request"] == 6 * (3 * (2 * 16 * 128 + 32 * 128) * 2
                                                    + 32 * 128 * 128 * 2)
    assert all(p["memory_ceiling_requests"] >= 8 for p in plans.values())


def test_moe_dry_run_sizes_each_device_for_the_ceiling(tmp_path) -> None:
    """Each MoE model's emulated device holds 24 requests of 2,048 tokens beside its weights:
    Qwen3-30B-A3B and gpt-oss-20b keep 2 layers x 2 x KV heads x head_dim x 2 B a token
    (4 x 128 and 8 x 64: 8 MiB a request), DeepSeek-V3 one 576-wide latent a layer; its first
    MoE layer is its fourth."""
    out = tmp_path / "moe.json"
    result = _bench("gpu_verify_moe.py", "--dry-run", "--json-out", str(out))
    assert result.returncode == 0, result.stderr
    plans = json.loads(out.read_text())["plans"]
    assert {name: p["kv_bytes_per_request"] for name, p in plans.items()} == {
        "qwen3_30b_a3b": 8 << 20, "gpt_oss_20b": 8 << 20, "deepseek_v3": 4 * 576 * 2 * 2048}
    assert plans["deepseek_v3"]["routed_layers"] == [3]
    assert all(p["memory_ceiling_requests"] == 24 for p in plans.values())
