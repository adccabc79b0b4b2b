"""Tensor parallelism without NVLink: the real vLLM startup logs of TP groups whose GPUs talk
over PCIe with vLLM's custom all-reduce off ('not supported on more than two PCIe-only GPUs',
'lacks GPU P2P capability') or whose P2P the log leaves unstated on a PCIe-only card, planned
from their config and logged flags (bench/vllm_logs.py), reconcile within 2% in KV tokens (or
pool GiB). A log outside is a strict xfail carrying its figure and why."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("vllm_logs", ROOT / "bench" / "vllm_logs.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

WITHIN = 0.02
NO_P2P = (
    "v1_qwen25_72b_4xl40s_pcie_gnosia",  # 4 x L40S, g6e.12xlarge: custom all-reduce off
    "v0_qwen25_32b_2xl40s_issue15815",  # 2 x L40S, V0 0.7.1: P2P unstated
    "v0_27_qwen3_235b_2507_fp8_4xrtxpro6000_kubesimplify",  # 4 PCIe-only GPUs
    "v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed",  # 4 x RTX 3090: custom all-reduce off
    "v1_qwen3_30b_a3b_4xa10_issue17469",  # 4 x A10, 0.8.5: P2P unstated
    # held out: added after every rule, fitted on by none
    "v1_qwen2_7b_2xa100_nop2p_dennislee",  # 2 x A100 80GB, 0.10.1.1: 'lacks GPU P2P'
    "v1_qwen2_7b_2xa100_025_nop2p_dennislee",  # the same pair at 0.25: 'lacks GPU P2P'
)
MISSES = {
    "v0_27_qwen3_235b_2507_fp8_4xrtxpro6000_kubesimplify":
        "+3.8% (+4.2% on the catalog's former 95.13 GiB card): 0.27.1's own line counts 2.46 "
        "GiB beyond the 55.19 GiB of weights, 1.70 consumed (free-memory drop: non-torch and "
        "the torch memory kept, the fused-MoE workspace among it) and 0.76 peak activation "
        "(with the CUDA-graph estimate); the plan 1.47 (0.25 non-torch, 1.12 torch peak with "
        "the 1.0 GiB workspace, 0.10 graphs); the excerpt breaks neither down",
    "v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed":
        "-7.2%: 0.11.0's video encoder profile with the inputs it holds, the tower, M-RoPE's "
        "4x rotary cache and the deepstack buffers planned (weights -0.03%); the plan takes "
        "0.17 GiB more than the log: its non-torch term (0.25 GiB) is this release's "
        "unmeasured estimate, beside the PyTorch sort's 38 B a logit",
    "v1_qwen3_30b_a3b_4xa10_issue17469":
        "+6.5%: the thread's sampler line (FlashInfer) is planned; 0.8.5 prints no profile "
        "line, and 0.30 GiB that its device-wide count held beyond the context, one NCCL "
        "communicator and the sampler is not broken down by any line",
}
CASES = {case.name: case for case in bench.cases()}


def _param(name):
    marks = [pytest.mark.xfail(strict=True, reason=MISSES[name])] if name in MISSES else []
    return pytest.param(name, marks=marks, id=name)


def test_the_set_is_planned_and_says_pcie():
    for name in NO_P2P:
        case = CASES[name]
        assert case.planned, name
        assert case.meta["flags"].get("tensor_parallel_size", 1) > 1, name


@pytest.mark.parametrize("name", [_param(n) for n in NO_P2P])
def test_no_p2p_log_reconciles_within_2_percent(name):
    outcome = bench.evaluate(CASES[name])
    assert outcome.kv_error is not None
    assert abs(outcome.kv_error) <= WITHIN, f"{name}: KV {outcome.kv_error:+.1%}"


def test_the_l40s_log_is_read_as_pcie_only_and_plans_no_collective_buffers():
    """The 4 x L40S log's ranks say custom all-reduce is off; vLLM 0.19 built its NCCL
    communicator before the memory baseline, so the plan keeps no collective buffers inside
    the budget and its pool lands within 2% of the logged 67,024 tokens."""
    case = CASES["v1_qwen25_72b_4xl40s_pcie_gnosia"]
    model, plan_flags, deploy = bench.flags_for(case)
    found = bench.predict(case.log, bench.plan_scenario(model, plan_flags, deploy))
    assert found.facts.allreduce_off == "pcie"
    assert found.planned.plan.line("comm_buffers") == 0
    assert found.facts.kv_cache_tokens == 67_024
