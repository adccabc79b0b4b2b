"""Compare `servecap simulate` with NVIDIA aiconfigurator 0.12 on static-batch cases.

aiconfigurator's step times come from kernels profiled on real H100/H200/A100 (vLLM backend).
It runs in its own venv, never as a servecap dependency:

    python3 -m venv bench/.aic-venv && bench/.aic-venv/bin/pip install aiconfigurator==0.12.0
    bench/.aic-venv/bin/python bench/aiconfigurator_compare.py --peer   # writes the peer JSON
    .venv/bin/python bench/aiconfigurator_compare.py                    # the comparison table

Targets: median |ratio - 1| of TTFT and TPOT <= 15 %, median tokens/s/GPU within 20 %.
"""

import json
import statistics
import sys
from pathlib import Path

PEER_JSON = Path(__file__).with_name("aiconfigurator_results.json")
SYSTEMS = {"h100-80gb": "h100_sxm", "h200-141gb": "h200_sxm", "a100-80gb": "a100_sxm"}
MODELS = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
          "llama-3.1-70b-instruct": "meta-llama/Meta-Llama-3.1-70B",
          "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B"}
SHAPES = (("llama-3.1-8b", 1), ("llama-3.1-70b-instruct", 4), ("llama-3.1-70b-instruct", 8),
          ("qwen3-30b-a3b", 1))
FP8 = (("llama-3.1-8b", 1), ("llama-3.1-70b-instruct", 4))
LENGTHS = ((1024, 128), (4000, 500))
BATCHES = (1, 16, 64)


def cases() -> list[dict]:
    out = []
    for device in SYSTEMS:
        for dtype in ("bf16", "fp8"):
            if dtype == "fp8" and device.startswith("a100"):
                continue  # no FP8 tensor cores
            for model, tp in (SHAPES if dtype == "bf16" else FP8):
                for isl, osl in LENGTHS:
                    out += [{"device": device, "dtype": dtype, "model": model, "tp": tp,
                             "isl": isl, "osl": osl, "batch": b} for b in BATCHES]
    return out


def peer() -> None:
    """aiconfigurator's static estimate of every case (its venv only)."""
    import logging

    from aiconfigurator.cli.api import cli_estimate

    logging.disable(logging.WARNING)
    done = json.loads(PEER_JSON.read_text())["rows"] if PEER_JSON.exists() else []
    rows = []
    for i, case in enumerate(cases()):
        known = [r for r in done if {k: r[k] for k in case} == case]
        if known:  # resume: a case already estimated is kept
            rows.append(known[0])
            continue
        result = cli_estimate(MODELS[case["model"]], SYSTEMS[case["device"]], mode="static",
                              backend_name="vllm", isl=case["isl"], osl=case["osl"],
                              batch_size=case["batch"], tp_size=case["tp"],
                              gemm_quant_mode="fp8" if case["dtype"] == "fp8" else None,
                              **({"moe_tp_size": case["tp"], "moe_ep_size": 1}
                                 if case["model"].startswith("qwen3") else {}))
        raw = result.raw if isinstance(result.raw, dict) else {}
        rows.append(case | {"ttft_ms": float(result.ttft), "tpot_ms": float(result.tpot),
                            "tokens_per_s_per_gpu": float(raw.get("tokens/s/gpu", 0.0))})
        print(i, rows[-1], flush=True)
        PEER_JSON.write_text(json.dumps({"aiconfigurator": "0.12.0", "backend": "vllm",
                                         "rows": rows}, indent=1) + "\n")


def servecap_case(case: dict, speed_of_light: bool = False) -> dict:
    """`simulate --policy static --engine plain` of `batch` identical requests arriving
    together: aiconfigurator prices the kernels alone, so no vLLM release's host terms."""
    from servecap.cli.sim_inputs import SimFlags, device_coefficients, rank_for
    from servecap.sim.config import SchedulerConfig
    from servecap.sim.kvpool import pool_blocks
    from servecap.sim.metrics import summarize
    from servecap.sim.run import simulate
    from servecap.sim.sampling import Request

    flags = SimFlags(device=case["device"], tensor_parallel_size=case["tp"],
                     weight_dtype=case["dtype"], context=case["isl"] + case["osl"],
                     speed_of_light=speed_of_light, engine="plain")
    ranked = rank_for(case["model"], flags)
    coef = device_coefficients(ranked, flags)
    reqs = [Request(i, 0.0, case["isl"], case["osl"]) for i in range(case["batch"])]
    cfg = SchedulerConfig(policy="static", max_num_seqs=case["batch"])
    blocks = max(pool_blocks(ranked.plan, 16), case["batch"] * (case["isl"] + case["osl"]))
    summary = summarize([simulate(reqs, coef, cfg, blocks)])
    end_s = summary["duration_s"]
    return {"ttft_ms": summary["ttft_ms"]["p50"], "tpot_ms": summary["tpot_ms"]["p50"],
            "tokens_per_s_per_gpu": case["batch"] * case["osl"] / end_s / case["tp"]}


def compare(speed_of_light: bool = False) -> None:
    peer_rows = json.loads(PEER_JSON.read_text())["rows"]
    ratios = {"ttft": [], "tpot": [], "tput": []}
    print(f"{'case':<44} {'TTFT ms s/a':>17} {'TPOT ms s/a':>15} {'tok/s/GPU s/a':>17}")
    for row in peer_rows:
        ours = servecap_case(row, speed_of_light)
        r = (ours["ttft_ms"] / row["ttft_ms"], ours["tpot_ms"] / row["tpot_ms"],
             ours["tokens_per_s_per_gpu"] / row["tokens_per_s_per_gpu"])
        for key, value in zip(ratios, r, strict=True):
            ratios[key].append(value)
        name = (f"{row['model'][:14]} {row['device'][:4]} {row['dtype']} tp{row['tp']} "
                f"{row['isl']}/{row['osl']} b{row['batch']}")
        print(f"{name:<44} {ours['ttft_ms']:7.1f}/{row['ttft_ms']:<7.1f}{r[0]:5.2f} "
              f"{ours['tpot_ms']:5.2f}/{row['tpot_ms']:<5.2f}{r[1]:5.2f} "
              f"{ours['tokens_per_s_per_gpu']:6.0f}/{row['tokens_per_s_per_gpu']:<6.0f}"
              f"{r[2]:5.2f}")
    _summary(ratios, len(peer_rows), speed_of_light)


def _summary(ratios: dict, count: int, speed_of_light: bool) -> None:
    mode = "speed of light" if speed_of_light else "measured efficiency tables (--engine plain)"
    print(f"\n{count} cases, servecap {mode} vs aiconfigurator 0.12 (vLLM backend):")
    for key, label, limit in (("ttft", "TTFT", 0.15), ("tpot", "TPOT", 0.15),
                              ("tput", "tokens/s/GPU", 0.20)):
        values = ratios[key]
        err = statistics.median(abs(v - 1) for v in values)
        print(f"  {label:<13} median ratio {statistics.median(values):.2f}, median |ratio-1| "
              f"{err:.1%} (target <= {limit:.0%}: {'met' if err <= limit else 'MISSED'}), "
              f"range {min(values):.2f}-{max(values):.2f}")


if __name__ == "__main__":
    if "--peer" in sys.argv:
        peer()
    else:
        compare("--speed-of-light" in sys.argv)
