"""The RTX 5090 in the catalog: CUDA's total on the card (a real TensorRT-LLM log's), its SMs and
compute capability, and its efficiency derated from the measured RTX PRO 6000 (the same GB202
chip with GDDR7), printed as such."""

import re
from pathlib import Path

from servecap.ledger.devices import GiB, find, sm_count, sm_version
from servecap.sim.efficiency import for_device, load_tables

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "trtllm_logs" / \
    "trtllm_llama31_8b_fp8_5090_issue4275.log"


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
