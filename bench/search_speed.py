"""servecap search at steady state: the 70B / 8 x H200 question, end to end, and its answer
at a short window beside the default one.

    .venv/bin/python bench/search_speed.py [WORKERS] [RATE] [--short N]

Llama-3.1-70B-Instruct on at most 8 H200, ISL 4,000 / OSL 500 (bench/isl4000-osl500.yaml: at
most 2,000 requests a candidate, each run sized by request lifetimes until steady), TTFT <=
1 s, TPOT <= 50 ms at RATE req/s (default 4), over TP 1,2,4,8 x PP 1,2,4 x weights bf16,fp8 x
KV bf16,fp8 x max_num_seqs 64,128,256 x max_num_batched_tokens 2048,8192, aggregated and
disaggregated 1:1, 1:2, 2:1, 1:3, with SLO-capacity bisection on the answers. Target: <= 30 s
wall on 2 cores. The machine this runs on is shared, so the CPU seconds of every process
(the parent's and what each batch and capacity measured in its worker) are printed beside
the wall time: CPU / workers is what the wall time would be with the cores to itself.
--short N repeats the question with at most N requests a candidate (200: the old fixed
window) and says whether both pick the same layout or call the two picks a tie.
"""

import sys
import time
from pathlib import Path

from servecap.cli.search_cmd import build_axes, build_problem
from servecap.model_configs import load_model
from servecap.sim.search.prices import price_table
from servecap.sim.search.search import run_search

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 30.0


def question(rate: float, num_requests: int | None = None):
    loaded = load_model("llama-3.1-70b-instruct")
    problem = build_problem(loaded, ROOT / "bench" / "isl4000-osl500.yaml", rate, "1s", "50ms",
                            0.9, None, num_requests, "chunked-prefill", "0ms", "50GB/s",
                            "least-tokens", True)
    axes = build_axes(loaded, "h200", 8, "1,2,4,8", "1,2,4", None, "bf16,fp8", "bf16,fp8",
                      "64,128,256", "2048,8192", "1:1,1:2,2:1,1:3")
    return problem, axes


def timed(problem, axes, workers: int) -> tuple[dict, float, float]:
    """The report, wall seconds, and CPU seconds: the parent's plus what each batch measured
    in its worker."""
    wall, cpu = time.perf_counter(), time.process_time()
    report = run_search(problem, axes, price_table(axes.devices, {}),
                        "meta-llama/Llama-3.1-70B-Instruct", workers=workers)
    cpu = time.process_time() - cpu + report["space"]["worker_cpu_s"]
    return report, time.perf_counter() - wall, cpu


def layout(label: str) -> str:
    """A candidate's layout: its label less the replica count."""
    return label.rsplit(" ", 1)[0]


def describe(report: dict, wall: float, cpu: float, workers: int, title: str) -> None:
    space = report["space"]
    simulated = sum(r["simulated_requests"] for r in report["candidates"])
    verdict = "met" if wall <= TARGET_S else f"MISSED (target <= {TARGET_S:.0f} s)"
    print(f"{title}: {space['num_candidates']:,} candidates, {space['memory_pruned']:,} fail "
          f"memory, {sum(space['skipped_monotonic'].values()):,} skipped by monotonicity, "
          f"{space['simulated']:,} simulated ({simulated:,} requests)")
    print(f"  {wall:.1f} s wall on {workers} workers ({verdict}); {cpu:.1f} CPU s over every "
          f"process = {cpu / workers:.1f} s a worker")
    best = report["cheapest"]
    if best is None:
        print(f"  no deployment qualifies: {report['binding_constraint']} binds")
        return
    low, high = best["capacity_rps_ci"] or (None, None)
    print(f"  cheapest: {best['label']}, {best['num_gpus']} GPUs, "
          f"${best['cost_usd_per_hour']:.2f}/h; SLO met {best['slo_attainment']:.1%} "
          f"({best['measured_requests']:,} of {best['simulated_requests']:,} requests measured,"
          f" steady state {best['steady_state']}); SLO capacity {best['capacity_rps']:.2f} "
          f"req/s (95 %: {low:.2f}-{high:.2f}, {best['capacity_limited_by']}); answer "
          f"steady: {report['steady_state']}")
    if report["tie"]:
        print(f"  tie ({report['tie']['why']}): {', '.join(report['tie']['labels'])}")


def picks(report: dict) -> set[str]:
    """The layouts a report answers with: the cheapest and any it ties with."""
    if report["cheapest"] is None:
        return set()
    return {layout(x) for x in (report["tie"] or {}).get("labels", [])} | \
        {layout(report["cheapest"]["label"])}


def main(workers: int, rate: float, short: int | None) -> None:
    problem, axes = question(rate)
    report, wall, cpu = timed(problem, axes, workers)
    describe(report, wall, cpu, workers, f"default (at most {problem.workload.num_requests:,} "
             "requests a candidate, until steady)")
    if short is None:
        return
    problem, axes = question(rate, short)
    small, wall, cpu = timed(problem, axes, workers)
    describe(small, wall, cpu, workers, f"at most {short:,} requests a candidate")
    same = picks(report) & picks(small)
    print(f"same layout or a tie at {short:,} and at the default: "
          f"{'yes: ' + ', '.join(sorted(same)) if same else 'NO'}")


if __name__ == "__main__":
    argv, short_n = sys.argv[1:], None
    if "--short" in argv:
        at = argv.index("--short")
        short_n, argv = int(argv[at + 1]), argv[:at] + argv[at + 2:]
    main(int(argv[0]) if argv else 2, float(argv[1]) if len(argv) > 1 else 4.0, short_n)
