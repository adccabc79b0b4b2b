"""`load --sweep`: the server's SLO capacity by the simulator's definition (sim/capacity.py):
rates doubled from a start while they meet the target, then bisected; each rate one bounded
run against the server, measured in its steady window (load/steady.py).

Before the ladder, two runs bound it: the synchronous rate (requests one at a time, the
start) and the saturation throughput (every request offered at once): a rate at or above
saturation fails unrun, as it does in the simulator (an open-loop queue there grows without
bound, however short a run is too short to show it).
"""

from collections.abc import Callable

from servecap.sim.capacity import capacity, verdict

POINT_LATENCY = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")


def sweep_capacity(run_at: Callable[[float], dict], target: float, synchronous_rps: float,
                   saturation_rps: float, tolerance: float) -> dict:
    """capacity.capacity over measured runs, with every probed rate's figures as `points`."""
    probes: dict[float, dict] = {}
    found = capacity(run_at, target, synchronous_rps, saturation_rps, tolerance, probes)
    points = [point_row(rate, probes[rate], target, found["capacity_rps"])
              for rate in sorted(probes)]
    return {"target_attainment": target, "synchronous_rps": synchronous_rps,
            "saturation_rps": saturation_rps, **found, "points": points}


def point_row(rate: float, window: dict, target: float, capacity_rps: float) -> dict:
    """One probed rate: what was offered and achieved, the SLO share with its interval,
    p50/p99 latencies, the verdict, and whether it is the capacity's run."""
    return {"rate_per_s": rate, "achieved_rps": window["achieved_rps"],
            "completed": window["completed"], "offered": window["offered"],
            "slo_attainment": window["slo_attainment"],
            "slo_attainment_ci": window["slo_attainment_ci"],
            "goodput_rps": window["goodput_rps"],
            "output_tokens_per_s": window["output_tokens_per_s"],
            "steady_state": window["steady_state"], "overloaded": window["overloaded"],
            "measured_requests": window["measured_requests"],
            **{k: {q: window[k][q] for q in ("p50", "p99")} for k in POINT_LATENCY},
            "verdict": verdict(window, target), "is_capacity": rate == capacity_rps}
