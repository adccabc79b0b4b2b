"""Simulated requests per second of wall time: 10,000 requests of the chat workload, one core;
then the same trace on llama-3.1-70b at tensor parallel 4 (the full step model: attention,
all-reduces, measured efficiency), timed for the whole process's CPU.

    .venv/bin/python bench/sim_speed.py [NUM_REQUESTS]
"""

import sys
import time
from dataclasses import replace
from pathlib import Path

from servecap.cli.sim_inputs import SimFlags, build_setup, load_workload
from servecap.sim.config import POLICIES, SchedulerConfig
from servecap.sim.run import simulate
from servecap.sim.sampling import draw_requests

ROOT = Path(__file__).resolve().parents[1]
TARGET_PER_S = 20_000


def main(num_requests: int = 10_000) -> None:
    chat = ROOT / "workloads" / "chat.yaml"
    setup = build_setup("llama-3.1-8b", SimFlags(device="h100-80gb", workload=chat,
                                                 step_overhead="2ms"))
    workload = replace(load_workload(chat), num_requests=num_requests)
    requests = draw_requests(workload)
    print(f"{num_requests:,} chat requests, llama-3.1-8b on h100-80gb, "
          f"{setup.num_blocks:,} KV blocks (best of 5 runs; CPU time shown too, since other "
          "processes on the core inflate wall time)")
    for policy in POLICIES:
        config = SchedulerConfig(policy=policy)
        wall, cpu = (min(t) for t in zip(*(_timed(requests, setup, config) for _ in range(5)),
                                         strict=True))
        rate = num_requests / wall
        verdict = "ok" if num_requests / cpu >= TARGET_PER_S else f"below {TARGET_PER_S:,}/s"
        print(f"  {policy:<17} {wall * 1000:7.1f} ms wall {rate:9,.0f} req/s  "
              f"{cpu * 1000:7.1f} ms CPU {num_requests / cpu:9,.0f} req/s  {verdict}")


def tensor_parallel(num_requests: int = 10_000) -> None:
    """Every policy at TP 4 and the CPU this part used, plan and setup included."""
    start = time.process_time()
    chat = ROOT / "workloads" / "chat.yaml"
    setup = build_setup("llama-3.1-70b-instruct", SimFlags(
        device="h100-80gb", workload=chat, tensor_parallel_size=4))
    requests = draw_requests(replace(load_workload(chat), num_requests=num_requests))
    print(f"{num_requests:,} chat requests, llama-3.1-70b-instruct on 4 x h100-80gb (-tp 4), "
          f"{setup.num_blocks:,} KV blocks per rank, {setup.coefficients.efficiency_source}")
    simulated = 0
    for policy in POLICIES:
        wall, cpu = _timed(requests, setup, SchedulerConfig(policy=policy))
        simulated += num_requests
        print(f"  {policy:<17} {wall * 1000:7.1f} ms wall {num_requests / cpu:9,.0f} req/s CPU")
    whole = time.process_time() - start
    verdict = "ok" if simulated / whole >= TARGET_PER_S else f"below {TARGET_PER_S:,}/s"
    print(f"  with setup: {simulated:,} requests in {whole:.2f} s CPU = "
          f"{simulated / whole:,.0f} req/s  {verdict}")


def _timed(requests, setup, config) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    simulate(requests, setup.coefficients, config, setup.num_blocks)
    return time.perf_counter() - wall, time.process_time() - cpu


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    if "--tp-only" not in sys.argv:
        main(count)
    tensor_parallel(count)
