"""The open-loop load sweep: offered rates up to saturation, stopping when the SLO fails."""

from collections.abc import Callable
from dataclasses import replace

from .sampling import Request, draw_requests
from .workload import Arrivals, Workload

POINT_KEYS = ("offered_rps", "achieved_rps", "slo_attainment", "goodput_rps",
              "input_tokens_per_s", "output_tokens_per_s", "completed", "rejected",
              "preemptions")


def at_rate(workload: Workload, rate_per_s: float) -> list[Request]:
    """The workload's lengths and seed at another offered rate: gamma keeps its CV, every
    other arrival process becomes Poisson."""
    cv = workload.arrivals.cv if workload.arrivals.kind == "gamma" else 1.0
    kind = "gamma" if workload.arrivals.kind == "gamma" else "poisson"
    return draw_requests(replace(workload, arrivals=Arrivals(kind, rate_per_s, cv)))


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
              rates: list[float] | None = None, num_rates: int = 10,
              on_point: Callable[[dict], None] | None = None,
              run_one_at_a_time: Callable[[list[Request]], dict] | None = None) -> dict:
    """`run` simulates one request list and returns its summary; `run_one_at_a_time` the same
    with one resident sequence (the synchronous end). A rate above the saturation rate cannot
    be sustained (its queue grows without bound however short the run), so it fails whatever
    its attainment. Capacity is the highest sustainable offered rate whose SLO attainment is
    at least `target`; the sweep stops at the first rate that fails. The saturation rate itself
    is utilisation 1, where an open-loop queue still grows without bound (as the square root
    of time), so it is not sustainable either: capacity lies strictly below it."""
    saturation = run(saturated(workload))
    low = run_one_at_a_time(saturated(workload))["achieved_rps"] if run_one_at_a_time else \
        saturation["achieved_rps"] / num_rates
    rates = rates or sweep_rates(low, saturation["achieved_rps"], num_rates)
    points, stopped = [], False
    for rate in rates:
        summary = run(at_rate(workload, rate))
        sustainable = rate < saturation["achieved_rps"]
        point = {"rate_per_s": rate, "sustainable": sustainable,
                 "meets_slo": sustainable and summary["slo_attainment"] >= target,
                 **{k: summary[k] for k in POINT_KEYS},
                 **{k: summary[k] for k in ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms",
                                            "e2e_ms")}}
        points.append(point)
        if on_point:
            on_point(point)
        if not point["meets_slo"]:
            stopped = True
            break
    good = [p["rate_per_s"] for p in points if p["meets_slo"]]
    return {"target_attainment": target, "synchronous_rps": low,
            "saturation_rps": saturation["achieved_rps"],
            "saturation_output_tokens_per_s": saturation["output_tokens_per_s"],
            "capacity_rps": max(good, default=0.0), "stopped_on_slo": stopped,
            "points": points}


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
        points.append({"concurrency": n, "meets_slo": summary["slo_attainment"] >= target,
                       **{k: summary[k] for k in POINT_KEYS},
                       **{k: summary[k] for k in ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms",
                                                  "e2e_ms")}})
    return points
