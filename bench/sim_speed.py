"""Simulated requests per second of wall time: 10,000 requests of the chat workload, one core.

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


def _timed(requests, setup, config) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    simulate(requests, setup.coefficients, config, setup.num_blocks)
    return time.perf_counter() - wall, time.process_time() - cpu


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
