"""The open-loop load sweep: offered rates up to saturation, each run until steady, stopping
when the SLO fails; the capacity is sim/capacity.py's."""

from collections.abc import Callable
from dataclasses import replace

from .capacity import capacity, meets, probe_row, verdict
from .sampling import Request, at_rate
from .sizing import RunSize, steady_point
from .workload import Workload

__all__ = ["at_rate", "saturated", "sweep_rates", "run_sweep", "concurrency_levels",
           "closed_loop_points"]

POINT_KEYS = ("offered_rps", "achieved_rps", "slo_attainment", "goodput_rps",
              "input_tokens_per_s", "output_tokens_per_s", "completed", "rejected",
              "preemptions", "steady_state", "steady_state_reason", "overloaded",
              "measured_requests", "simulated_requests")
POINT_CIS = ("slo_attainment_ci", "goodput_rps_ci", "achieved_rps_ci", "output_tokens_per_s_ci")
LATENCY_KEYS = ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")


def saturated(workload: Workload) -> list[Request]:
    """Every request offered at time zero: the throughput end of the sweep."""
    return [replace(r, arrival_s=0.0) for r in at_rate(workload, 1.0)]


def sweep_rates(low_rps: float, high_rps: float, num_rates: int) -> list[float]:
    """A benchmark's sweep mode: evenly spaced from the synchronous rate (one request at a
    time) to the throughput rate (everything offered at once)."""
    if num_rates == 1 or high_rps <= low_rps:
        return [high_rps]
    step = (high_rps - low_rps) / (num_rates - 1)
    return [low_rps + i * step for i in range(num_rates - 1)] + [high_rps]


def run_sweep(workload: Workload, run: Callable[[list[Request]], dict], target: float,
              size: RunSize, rates: list[float] | None = None, num_rates: int = 10,
              on_point: Callable[[dict], None] | None = None,
              run_one_at_a_time: Callable[[list[Request]], dict] | None = None,
              bisect: bool = True) -> dict:
    """`run` simulates one request list and returns its measured summary (sim/measure.py);
    `run_one_at_a_time` the same with one resident sequence (the synchronous end). Each rate
    is run until steady (sim/sizing.py, up to size.ceiling requests); the sweep stops at the
    first rate that fails the SLO target. The capacity is capacity.capacity's: the highest
    rate meeting the target, bisected to its tolerance, with its interval (the swept rates
    are its first probes). The saturation rate (every request offered at once) is a
    throughput, not a sustainable rate: at utilisation 1 an open-loop queue grows without
    bound. bisect=False (no SLO to meet) takes the highest swept rate that met the target
    instead of bisecting."""
    saturation = run(saturated(workload))
    low = run_one_at_a_time(saturated(workload))["achieved_rps"] if run_one_at_a_time else \
        saturation["achieved_rps"] / num_rates
    rates = rates or sweep_rates(low, saturation["achieved_rps"], num_rates)
    probes: dict[float, dict] = {}

    def point(rate: float) -> dict:
        if rate not in probes:
            probes[rate] = steady_point(workload, rate, run, size)
        return probes[rate]

    points, stopped, most = [], False, saturation["achieved_rps"]
    for rate in rates:
        entry = sweep_point(rate, point(rate), target, most)
        points.append(entry)
        if on_point:
            on_point(entry)
        if not entry["meets_slo"]:
            stopped = True
            break
    good = [p["rate_per_s"] for p in points if p["meets_slo"]]
    found = capacity(point, target, max(good, default=rates[0]), most, probes=probes) \
        if bisect else swept_capacity(points, probes, target)
    rate = found["capacity_rps"]
    at = sweep_point(rate, probes[rate], target, most) if rate else None
    return {"target_attainment": target, "synchronous_rps": low,
            "saturation_rps": saturation["achieved_rps"],
            "saturation_output_tokens_per_s": saturation["output_tokens_per_s"],
            **found, "capacity_point": at, "stopped_on_slo": stopped, "points": points}


def swept_capacity(points: list[dict], probes: dict[float, dict], target: float) -> dict:
    """The highest swept rate that met the target, without bisection (no SLO was given:
    every completed request meets it, so a bisection would only find saturation again)."""
    good = [p["rate_per_s"] for p in points if p["meets_slo"]]
    rate = max(good, default=0.0)
    return {"capacity_rps": rate, "capacity_rps_ci": None, "capacity_tolerance": None,
            "capacity_steady_state": bool(rate) and probes[rate]["steady_state"],
            "capacity_limited_by": "no SLO target: the highest swept rate",
            "capacity_probes": [probe_row(r, probes[r], target) for r in sorted(probes)]}


def sweep_point(rate: float | None, summary: dict, target: float,
                saturation_rps: float | None = None) -> dict:
    """One swept rate: its verdict against the target, the run's window and its figures. A
    rate at or above the saturation rate is not sustainable whatever its run showed."""
    sustainable = not summary["overloaded"] and (
        rate is None or saturation_rps is None or rate < saturation_rps)
    good = sustainable and meets(summary, target)
    return {"rate_per_s": rate, "sustainable": sustainable, "meets_slo": good,
            "verdict": verdict(summary, target) if sustainable else "misses",
            **{k: summary[k] for k in POINT_KEYS},
            **{k: summary.get(k) for k in POINT_CIS},
            **{k: summary[k] for k in LATENCY_KEYS},
            **{f"{k}_ci": summary.get(f"{k}_ci") for k in LATENCY_KEYS}}


def concurrency_levels(max_concurrency: int) -> list[int]:
    """1, 2, 4, ... doubling up to and including max_concurrency."""
    levels, n = [], 1
    while n < max_concurrency:
        levels.append(n)
        n *= 2
    return levels + [max_concurrency]


def closed_loop_points(workload: Workload, run: Callable[[list[Request], int], dict],
                       max_concurrency: int, target: float) -> list[dict]:
    """Closed-loop points beside the open-loop rates: the workload's requests with N in
    flight (N doubling up to max_concurrency), each the next sent as one finishes."""
    requests = at_rate(workload, 1.0)
    points = []
    for n in concurrency_levels(max_concurrency):
        summary = run(requests, n)
        entry = sweep_point(None, summary, target)
        del entry["rate_per_s"]
        points.append({"concurrency": n} | entry)
    return points
