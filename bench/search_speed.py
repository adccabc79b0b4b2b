"""servecap search speed: candidates simulated per second, and the 70B / 8 x H200 question.

    .venv/bin/python bench/search_speed.py [WORKERS] [RATE]

Llama-3.1-70B-Instruct on at most 8 H200, ISL 4,000 / OSL 500 (bench/isl4000-osl500.yaml),
TTFT <= 1 s, TPOT <= 50 ms at RATE req/s (default 4), over the full space: TP 1,2,4,8 x
PP 1,2,4 x weights bf16,fp8 x KV bf16,fp8 x max_num_seqs 64,128,256 x max_num_batched_tokens
2048,8192, aggregated and disaggregated 1:1, 1:2, 2:1, 1:3. Target: under 60 s with at least
200 candidates. Wall times on a shared machine are noisy; CPU time is printed beside them.
"""

import sys
import time
from pathlib import Path

from servecap.cli.search_cmd import build_axes, build_problem
from servecap.model_configs import load_model
from servecap.sim.search.prices import price_table
from servecap.sim.search.search import run_search

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 60.0
MIN_CANDIDATES = 200


def question(rate: float, capacity: bool):
    loaded = load_model("llama-3.1-70b-instruct")
    problem = build_problem(loaded, ROOT / "bench" / "isl4000-osl500.yaml", rate, "1s", "50ms",
                            0.9, None, None, "chunked-prefill", "0ms", "50GB/s",
                            "least-tokens", capacity)
    axes = build_axes(loaded, "h200", 8, "1,2,4,8", "1,2,4", None, "bf16,fp8", "bf16,fp8",
                      "64,128,256", "2048,8192", "1:1,1:2,2:1,1:3")
    return problem, axes


def timed(problem, axes, workers: int) -> tuple[dict, float, float]:
    """The report, wall seconds, and CPU seconds: the parent's plus what each batch measured
    in its worker. On a shared machine CPU / workers is what the wall time would be with the
    cores to itself."""
    wall, cpu = time.perf_counter(), time.process_time()
    report = run_search(problem, axes, price_table(axes.devices, {}),
                        "meta-llama/Llama-3.1-70B-Instruct", workers=workers)
    cpu = time.process_time() - cpu + report["space"]["worker_cpu_s"]
    return report, time.perf_counter() - wall, cpu


def main(workers: int = 2, rate: float = 4.0) -> None:
    problem, axes = question(rate, capacity=False)
    report, wall, cpu = timed(problem, axes, workers)
    space = report["space"]
    print(f"space: {space['num_candidates']:,} candidates, {space['memory_pruned']:,} fail "
          f"memory, {sum(space['skipped_monotonic'].values()):,} skipped by monotonicity")
    print(f"rate: {space['simulated']:,} candidates simulated in {wall:.1f} s wall on "
          f"{workers} workers = {space['simulated'] / wall:,.1f} candidates/s (no capacity "
          f"bisection); {cpu:.1f} CPU s = {space['simulated'] / cpu:,.1f} candidates per "
          "CPU second")
    problem, axes = question(rate, capacity=True)
    report, wall, cpu = timed(problem, axes, workers)
    verdict = "ok" if wall < TARGET_S and space["num_candidates"] >= MIN_CANDIDATES else \
        f"MISSED (target < {TARGET_S:.0f} s, >= {MIN_CANDIDATES} candidates)"
    print(f"question: {wall:.1f} s wall with SLO-capacity bisection ({verdict}; {cpu:.1f} CPU "
          f"s over every process, {cpu / workers:.1f} s per worker)")
    best = report["cheapest"]
    if best is None:
        print(f"no deployment qualifies at {rate:g} req/s: {report['binding_constraint']} binds")
        return
    print(f"cheapest: {best['label']}, {best['num_gpus']} GPUs, "
          f"${best['cost_usd_per_hour']:.2f}/h, TTFT p99 {best['ttft_ms']['p99']:,.0f} ms, "
          f"TPOT p99 {best['tpot_ms']['p99']:,.1f} ms, capacity {best['capacity_rps']:.2f} req/s")
    print("frontier (tokens/s per GPU, per user):")
    for row in report["frontier"]:
        print(f"  {row['label']:<48} {row['tokens_per_s_per_gpu']:8,.0f} "
              f"{row['tokens_per_s_per_user']:6,.0f}  {'meets' if row['meets_slo'] else 'misses'}")
    print(report["launch"]["vllm"][0])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2,
         float(sys.argv[2]) if len(sys.argv) > 2 else 4.0)
