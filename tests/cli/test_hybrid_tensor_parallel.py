"""`plan --engine vllm -tp N` for hybrids: each rank's state and KV shapes, page, blocks and
max concurrency against an independent computation of vLLM's per-rank rules (docs/hybrid.md:
heads / tp, KV heads replicated below one per rank, Mamba-2 B/C groups replicated when tp does
not divide n_groups; mamba_utils.py MambaStateShapeCalculator)."""

import json
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
POOL, CONTEXT = 20 * 2**30, 8192


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def plan(run, config: Path, tp: int, engine: str = "vllm") -> dict:
    result = run("plan", config, "--device", "h100-80gb", "--context", str(CONTEXT), "--engine",
                 engine, "-tp", str(tp), "--kv-cache-memory", "20GiB", "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def gated_deltanet(cfg: dict, tp: int) -> tuple[int, int, int, int]:
    """(state layers, attention layers, one state's bytes, one attention token's bytes) per
    rank: conv (kernel - 1, (2 Hk dk + Hv dv) / tp) bf16, recurrent (Hv / tp, dv, dk) in
    mamba_ssm_dtype; KV max(1, H_kv / tp) heads, bf16."""
    text = cfg["text_config"]
    hk, hv = text["linear_num_key_heads"], text["linear_num_value_heads"]
    dk, dv = text["linear_key_head_dim"], text["linear_value_head_dim"]
    ssm = {"float32": 4, "bfloat16": 2}[text["mamba_ssm_dtype"]]
    conv = (text["linear_conv_kernel_dim"] - 1) * (2 * hk * dk + hv * dv) // tp * 2
    state = conv + hv // tp * dv * dk * ssm
    layers = text["num_hidden_layers"]
    full = layers // text["full_attention_interval"]
    kv = max(1, text["num_key_value_heads"] // tp)
    return layers - full, full, state, 2 * kv * text["head_dim"] * 2


def mamba2(cfg: dict, tp: int) -> tuple[int, int, int, int]:
    """Nemotron-H: conv (kernel - 1, (H d + 2 G' N) / tp) bf16 with G' = G when tp divides it
    (else tp), recurrent (H / tp, d, N) in mamba_ssm_cache_dtype."""
    heads, dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
    groups, d_state = cfg["n_groups"], cfg["ssm_state_size"]
    groups = groups if groups % tp == 0 else tp
    ssm = {"float32": 4, "bfloat16": 2}[cfg["mamba_ssm_cache_dtype"]]
    conv = (cfg["conv_kernel"] - 1) * (heads * dim + 2 * groups * d_state) // tp * 2
    state = conv + heads // tp * dim * d_state * ssm
    pattern = cfg["hybrid_override_pattern"]
    kv = max(1, cfg["num_key_value_heads"] // tp)
    return pattern.count("M"), pattern.count("*"), state, 2 * kv * cfg["head_dim"] * 2


# (config, shapes, release, block alignment, state pages a request holds in align mode): from
# 0.33 gated-DeltaNet layers on an H100 (FlashInfer's GDN prefill) align the block to 64 and
# hold one prefill checkpoint page more (vllm/platforms/interface.py _align_hybrid_block_size,
# vllm/v1/kv_cache_interface.py MambaSpec at v0.33.0); Mamba-2 layers do not
CASES = [("Qwen--Qwen3.6-35B-A3B", gated_deltanet, "vllm==0.32", 16, 2),
         ("Qwen--Qwen3.6-35B-A3B", gated_deltanet, "vllm==0.33", 64, 3),
         ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", mamba2, "vllm", 16, 2)]


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize(("name", "shapes", "engine", "align", "pages"), CASES)
def test_hybrid_pool_per_rank_at_tensor_parallelism(run, name, shapes, engine, align, pages,
                                                    tp) -> None:
    cfg = json.loads((CONFIGS / name / "config.json").read_text())
    states, attention, state, one_token = shapes(cfg, tp)
    out = plan(run, CONFIGS / name / "config.json", tp, engine)
    block = align * cdiv(state, align * one_token)  # the attention block raised to hold a state
    page = block * one_token
    group = max(states, attention) if max(states, attention) < 1.5 * min(states, attention) \
        else min(states, attention)
    blocks = POOL // page // group
    per_request = cdiv(CONTEXT, block) + pages * cdiv(states, group)
    assert out["tensor_parallel_size"] == tp
    assert out["state_bytes_per_request"] == states * state
    assert out["kv_bytes_per_token"] == attention * one_token
    assert out["block_bytes"] == page * group
    assert out["num_gpu_blocks"] == blocks
    assert out["blocks_per_request"] == per_request
    assert out["max_concurrency"] == pytest.approx(blocks / per_request)


def test_a_tp_that_does_not_divide_the_heads_is_refused_by_name(run) -> None:
    """3 ranks split neither Nemotron-3-Nano's 32 query heads nor its 64 Mamba heads: one line
    naming the flag and the allowed sizes, never a rounded shard."""
    result = run("plan", CONFIGS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" / "config.json",
                 "--device", "h100-80gb", "--context", "8192", "--engine", "vllm", "-tp", "3")
    assert result.exit_code == 2
    assert "--tensor-parallel-size = 3" in result.output and "allowed: 1, 2, 4" in result.output
    assert "Traceback" not in result.output
