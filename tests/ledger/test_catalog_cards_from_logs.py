"""Cards added to the catalog from real logs: each one's usable bytes are the total CUDA reported
on it in a kept log (RTX 5090: TensorRT-LLM's; A40 and RTX 3090: vLLM's), with its SMs, compute
capability and an efficiency derated from a measured part, printed as such."""

import re
from pathlib import Path

import pytest

from servecap.ledger.devices import GiB, find, sm_count, sm_version
from servecap.sim.efficiency import for_device, load_tables

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOG = FIXTURES / "trtllm_logs" / "trtllm_llama31_8b_fp8_5090_issue4275.log"


def test_usable_bytes_are_what_cuda_reported_on_a_5090() -> None:
    total = float(re.search(r"total: ([\d.]+) GiB", LOG.read_text()).group(1))
    device = find("rtx-5090")
    assert device is not None and device.name == "rtx-5090-32gb"
    assert abs(device.usable_bytes / GiB - total) <= 0.005  # the log's two decimals


def test_sm_count_and_capability() -> None:
    assert sm_count("rtx-5090-32gb") == 170
    assert sm_version("NVIDIA GeForce RTX 5090 (rtx-5090-32gb)") == 120


def test_geforce_peaks_with_the_rtx_pro_6000s_shares() -> None:
    five, pro = find("rtx-5090-32gb"), find("rtx-pro-6000-96gb")
    assert five.bf16_flops_per_s < pro.bf16_flops_per_s / 2  # FP32 accumulate, half rate
    assert five.bandwidth_bytes_per_s == pro.bandwidth_bytes_per_s
    eff, measured = for_device("rtx-5090-32gb"), load_tables()["devices"]["rtx-pro-6000-96gb"]
    assert eff.source.startswith("derated:") and "rtx-pro-6000-96gb" in eff.source
    assert eff.gemm_efficiency == measured["gemm_efficiency"]
    assert eff.bandwidth_efficiency == measured["bandwidth_efficiency"]


@pytest.mark.parametrize(("name", "log", "pattern"), [
    ("a40-48gb", "vllm_logs/v0_26_llama31_8b_a40_vireshkoli.log",
     r"Free memory on device \([\d.]+/([\d.]+) GiB\)"),
    ("rtx-3090-24gb", "vllm_logs/v0_llama31_8b_rtx3090.log", r"total_gpu_memory=([\d.]+)GiB")])
def test_ampere_cards_hold_the_total_vllm_logged(name, log, pattern) -> None:
    total = float(re.search(pattern, (FIXTURES / log).read_text()).group(1))
    device = find(name)
    assert abs(device.usable_bytes / GiB - total) <= 0.005
    assert sm_version(name) == 86
    eff, tables = for_device(name), load_tables()["devices"]
    assert eff.gemm_efficiency == tables["a100-80gb"]["gemm_efficiency"]  # Ampere compute
    assert eff.bandwidth_efficiency == tables["l40s-48gb"]["bandwidth_efficiency"]  # GDDR6(X)


def test_the_3090_has_no_fp8_tensor_cores_and_geforce_bf16() -> None:
    d3090, a40 = find("rtx-3090-24gb"), find("a40-48gb")
    assert d3090.flops_per_s("fp8") == d3090.bf16_flops_per_s  # no FP8: the BF16 rate
    assert d3090.bf16_flops_per_s < a40.bf16_flops_per_s / 2  # GeForce FP32 accumulate
    assert sm_count("a40-48gb") == 84 and sm_count("rtx-3090-24gb") == 82
