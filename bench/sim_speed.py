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
          f"{setup.num_blocks:,} KV blocks (best of 3 runs, one core)")
    for policy in POLICIES:
        config = SchedulerConfig(policy=policy)
        best = min(_timed(requests, setup, config) for _ in range(3))
        rate = num_requests / best
        verdict = "ok" if rate >= TARGET_PER_S else f"below {TARGET_PER_S:,}/s"
        print(f"  {policy:<17} {best * 1000:8.1f} ms wall  {rate:10,.0f} simulated requests/s"
              f"  {verdict}")


def _timed(requests, setup, config) -> float:
    start = time.perf_counter()
    simulate(requests, setup.coefficients, config, setup.num_blocks)
    return time.perf_counter() - start


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
