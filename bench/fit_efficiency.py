"""Fit sim/efficiency_tables.json from aiconfigurator-core's measured kernel database.

Run with the peer's own venv (never a servecap dependency):
    python3 -m venv bench/.aic-venv && bench/.aic-venv/bin/pip install aiconfigurator==0.12.0
    bench/.aic-venv/bin/python bench/fit_efficiency.py
Reads vLLM 0.24.0 kernel timings (Apache-2.0) and writes, per device, the median achieved
share of peak for large BF16 (and FP8) GEMMs, for memory-bound (m <= 16) GEMMs' weight reads
and for causal prefill attention; and a per-layer fixed time from the smallest kernels.
"""

import json
from pathlib import Path

import aiconfigurator_core
import pandas as pd
import yaml

SYSTEMS = Path(aiconfigurator_core.__file__).parent / "systems"
VERSION = "0.24.0"
OUT = Path(__file__).resolve().parents[1] / "sim" / "efficiency_tables.json"
DEVICES = {"h100-80gb": "h100_sxm", "h200-141gb": "h200_sxm", "a100-80gb": "a100_sxm",
           "a100-40gb": "a100_sxm", "h100-pcie-80gb": "h100_pcie", "b200-180gb": "b200_sxm",
           "l40s-48gb": "l40s", "l4-24gb": "l4", "b300-288gb": "b300_sxm",
           "gb200-186gb": "gb200", "rtx-pro-6000-96gb": "rtx_pro_6000_server"}
KERNELS_PER_LAYER = 6  # 2 norms, rotary, activation, 2 residual adds: launch-bound kernels


def fit(system: str) -> dict | None:
    gpu = yaml.safe_load((SYSTEMS / f"{system}.yaml").read_text())["gpu"]
    data = SYSTEMS / "data" / system
    version = _version(data / "gemm" / "vllm")
    if version is None:
        return None
    gemm_file = data / "gemm" / "vllm" / version / "gemm_perf.parquet"
    attn_file = data / "attention" / "vllm" / version / "context_attention_perf.parquet"
    gemm = pd.read_parquet(gemm_file)
    bf16 = gemm[gemm.gemm_dtype == "bfloat16"]
    seconds = bf16.latency / 1e3  # milliseconds in the database
    big = (bf16.m >= 2048) & (bf16.n >= 4096) & (bf16.k >= 4096)
    gemm_eff = (2 * bf16.m * bf16.n * bf16.k / seconds / gpu["bfloat16_tc_flops"])[big].median()
    thin = (bf16.m <= 16) & (bf16.n * bf16.k >= 4096 * 4096)
    bw_eff = (2 * bf16.n * bf16.k / seconds / gpu["mem_bw"])[thin].median()
    floor_s = seconds.quantile(0.01)
    fp8 = gemm[gemm.gemm_dtype == "fp8"]
    fp8_big = (fp8.m >= 2048) & (fp8.n >= 4096) & (fp8.k >= 4096)
    fp8_eff = (2 * fp8.m * fp8.n * fp8.k / (fp8.latency / 1e3)
               / gpu.get("fp8_tc_flops", float("inf")))[fp8_big].median()
    attn_eff = None
    if attn_file.exists():
        att = pd.read_parquet(attn_file)
        full = att.window_size == 0 if "window_size" in att else True
        att = att[(att.kv_cache_dtype == "bfloat16") & (att.isl >= 1024) & full]
        flops = 4 * att.batch_size * att.num_heads * att.head_dim * att.isl ** 2 / 2
        attn_eff = float((flops / (att.latency / 1e3) / gpu["bfloat16_tc_flops"]).median())
    moe_file = data / "moe" / "vllm" / version / "moe_perf.parquet"
    moe_eff = _moe_efficiency(moe_file, gpu)
    moe_fixed = _moe_fixed_s(moe_file, gpu["mem_bw"] * float(bw_eff))
    eras = _moe_eras(data / "moe" / "vllm", gpu, gpu["mem_bw"] * float(bw_eff))
    return {"gemm_efficiency": round(min(float(gemm_eff), 1.0), 3),
            **({"moe_gemm_efficiency": round(moe_eff, 3)} if moe_eff else {}),
            **({"moe_layer_overhead_s": round(moe_fixed, 7)} if moe_fixed else {}),
            "attention_efficiency": round(min(attn_eff or gemm_eff, 1.0), 3),
            "bandwidth_efficiency": round(min(float(bw_eff), 1.0), 3),
            **({"gemm_efficiency_fp8": round(min(float(fp8_eff), 1.0), 3)}
               if fp8_eff == fp8_eff and "fp8_tc_flops" in gpu else {}),
            "step_overhead_s": 0.0,
            "layer_overhead_s": round(KERNELS_PER_LAYER * float(floor_s), 7),
            **({"moe_eras": eras} if len(eras) > 1 else {}),
            "fitted_from": f"systems/data/{system} (vllm {version})"}


def _moe_eras(folder: Path, gpu: dict, bandwidth: float) -> list[dict]:
    """The grouped-expert efficiency and fixed cost of every vLLM release the database
    measured the MoE kernels of, oldest first: the kernels' own era (sim/efficiency.py picks
    the one a simulated release ran)."""
    out = []
    for path in sorted(folder.glob("*/moe_perf.parquet"),
                       key=lambda p: tuple(int(x) for x in p.parent.name.split(".")[:3])):
        eff, fixed = _moe_efficiency(path, gpu), _moe_fixed_s(path, bandwidth)
        if eff:
            out.append({"vllm": path.parent.name, "moe_gemm_efficiency": round(eff, 3),
                        **({"moe_layer_overhead_s": round(fixed, 7)} if fixed else {})})
    return out


def _moe_efficiency(path: Path, gpu: dict) -> float | None:
    """Grouped expert GEMMs (BF16, balanced routing, no expert sharding) at >= 4,096 tokens:
    2 x 3 x hidden x inter x top-k FLOPs per token over the measured time, as a share of
    peak."""
    if not path.exists():
        return None
    moe = pd.read_parquet(path)
    moe = moe[(moe.moe_dtype == "bfloat16") & (moe.distribution == "balanced")
              & (moe.moe_tp_size == 1) & (moe.moe_ep_size == 1) & (moe.num_tokens >= 4096)]
    if moe.empty:
        return None
    flops = 6 * moe.hidden_size * moe.inter_size * moe.topk * moe.num_tokens
    return min(float((flops / (moe.latency / 1e3) / gpu["bfloat16_tc_flops"]).median()), 1.0)


def _moe_fixed_s(path: Path, bandwidth: float) -> float | None:
    """A grouped-expert kernel's time at one token beyond reading its top-k experts at the
    fitted bandwidth (BF16, balanced, no expert sharding): the routing and launch cost every
    MoE layer pays, median over the shapes measured."""
    if not path.exists():
        return None
    moe = pd.read_parquet(path)
    moe = moe[(moe.moe_dtype == "bfloat16") & (moe.distribution == "balanced")
              & (moe.moe_tp_size == 1) & (moe.moe_ep_size == 1) & (moe.num_tokens == 1)]
    if moe.empty:
        return None
    reads = 3 * moe.hidden_size * moe.inter_size * moe.topk * 2 / bandwidth
    return max(float((moe.latency / 1e3 - reads).median()), 0.0)


def _version(folder: Path) -> str | None:
    """VERSION where measured, else the newest vLLM version the database has."""
    if (folder / VERSION).is_dir():
        return VERSION
    found = sorted(p.name for p in folder.glob("*") if (p / "gemm_perf.parquet").exists())
    return found[-1] if found else None


def main() -> None:
    tables = {"source": f"fitted by bench/fit_efficiency.py from aiconfigurator-core 0.12.0 "
                        f"(Apache-2.0) measured vLLM {VERSION} kernels", "devices": {}}
    for name, system in DEVICES.items():
        row = fit(system)
        if row is not None:
            tables["devices"][name] = row
            print(name, row)
    OUT.write_text(json.dumps(tables, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
