"""From 0.20 vLLM prints 'GPU KV cache size' as int(max_concurrency x max_model_len)
(vllm/v1/core/kv_cache_utils.py), which for a model with sliding-window layers is no multiple
of the block size: reconcile read the blocks back by the older rule (tokens // groups x block
size) and refused a Gemma 4 start as another model's (Michal1337/clinician-co-pilot vllm.log
@ 7b232e1f, vLLM 0.20.2 on an H200: 984,297 tokens, 71.67 GiB)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "fixtures" / "vllm_logs" / "v0_20_gemma4_26b_h200_clinician.log"
CONFIG = ROOT / "tests" / "fixtures" / "configs" / "google--gemma-4-26B-A4B"


def test_a_020_token_line_reads_back_to_the_blocks_its_pool_holds() -> None:
    out = subprocess.run([sys.executable, "-m", "servecap.cli", "reconcile", str(LOG),
                          "--model", str(CONFIG), "--device", "h200-141gb", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr  # the same model, and the plan agrees
    rows = {r["key"]: r for r in json.loads(out.stdout)["rows"]}
    blocks, tokens = rows["num_gpu_blocks"]["logged"], rows["kv_cache_tokens"]["logged"]
    assert tokens == 984_297 and tokens % 16 != 0
    # the pool's 71.67 GiB over the blocks read back: the 655,360 B a block the plan gives
    assert abs(71.67 * 2**30 / blocks / 655_360 - 1) < 0.001
    # and the blocks print the logged count by the release's rule
    per_request = rows["num_gpu_blocks"]["logged"] / rows["max_concurrency"]["logged"]
    assert int(blocks / round(per_request) * 32_768) == tokens
    assert abs(rows["kv_cache_tokens"]["predicted"] / tokens - 1) < 0.05


def test_a_token_line_reads_back_at_the_plans_own_length() -> None:
    """The blocks a token line stands for are counted at the max_model_len the plan's blocks
    per request were counted at: a 0.28 start of Qwen3-8B at 4,096 tokens reconciled with
    --max-model-len 2048 or 16384 was refused as another model's (4,720,761 and 590,095 B a
    block against the 2,359,296 the config needs) when the log's length divided the plan's
    blocks per request (kuotunyu/vllm-single-gpu-slo-lab, tests/fixtures/vllm_logs)."""
    log = ROOT / "tests" / "fixtures" / "vllm_logs" / "v0_28_qwen3_8b_rtx4090_warm_slolab.log"
    for length in ("2048", "16384"):
        out = subprocess.run([sys.executable, "-m", "servecap.cli", "reconcile", str(log),
                              "--model", str(ROOT / "tests" / "fixtures" / "configs" /
                                             "Qwen--Qwen3-8B"),
                              "--device", "rtx-4090-24gb", "--max-model-len", length,
                              "--json"], capture_output=True, text=True)
        assert out.returncode in (0, 1), out.stderr  # planned, not refused
        rows = {r["key"]: r for r in json.loads(out.stdout)["rows"]}
        assert rows["num_gpu_blocks"]["logged"] == 29_696 // 16
