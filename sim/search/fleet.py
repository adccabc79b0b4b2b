"""The fleet question: a rate per hour of a day, the cheapest fleet for each hour, and when
to scale up, read on the metrics vLLM exports.

Each layout that fits is priced once, as one replica: its SLO capacity (sim/capacity.py, the
bisection search re-checks answers with) and, run at that capacity, the time averages of
the three gauges vLLM's Prometheus endpoint exports (vllm/v1/metrics/loggers.py at v0.21.0:
vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc, 1 = the
whole pool). An hour's fleet is ceil(rate / capacity) replicas of the layout that costs
least at that rate: k replicas behind a router serve at least k x one replica's capacity
(pooling only shortens queues), so the count errs on the side of more. A replica whose
gauges stay above its capacity's averages is past the load its SLOs hold at: the scale-up
thresholds.
"""

import csv
import math
from dataclasses import replace
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.sim.deploy import run_once
from servecap.sim.sampling import at_rate
from servecap.sim.state import SimResult

from .evaluate import deployment_of, price_layout, slo_capacity
from .execute import map_tasks
from .problem import Problem
from .space import Candidate, Layout

MAX_HOURS = 24 * 366  # a year of hours at most
METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting",
           "vllm:kv_cache_usage_perc")


def read_rate_trace(path: Path) -> list[tuple[int, float]]:
    """(hour, requests per second) rows of a CSV with the columns hour and rate_per_s, hours
    0, 1, 2, ... in order (a day is 24 rows)."""
    where = f"--rate-trace {path}"
    if not path.is_file():
        raise SpecError(where, str(path), "a CSV file with columns hour,rate_per_s")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or set(rows[0]) != {"hour", "rate_per_s"}:
        raise SpecError(where, sorted(rows[0]) if rows else "empty",
                        "columns hour,rate_per_s and at least one row")
    if len(rows) > MAX_HOURS:
        raise SpecError(where, f"{len(rows):,} rows", f"at most {MAX_HOURS:,} hours")
    out = []
    for i, row in enumerate(rows):
        out.append((_hour(row["hour"], i, where), _rate(row["rate_per_s"], i, where)))
    if max(r for _, r in out) <= 0:
        raise SpecError(f"{where} rate_per_s", 0, "at least one hour with a rate > 0")
    return out


def _hour(text: str, index: int, where: str) -> int:
    if text is None or not text.strip().isdigit() or int(text) != index:
        raise SpecError(f"{where} row {index + 2} hour", text, f"{index} (hours 0, 1, 2, ... "
                        "in order)")
    return index


def _rate(text: str, index: int, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not 0 <= value < 1e6:
        raise SpecError(f"{where} row {index + 2} rate_per_s", text,
                        "requests per second, >= 0")
    return value


def price_replica(problem: Problem, layout: Layout) -> dict:
    """One replica of the layout: its SLO capacity from the problem's rate (the trace's
    peak) with its interval, and vLLM's gauges averaged over a run at that capacity."""
    priced = price_layout(problem, layout)
    cand = Candidate(layout, 1)
    found = slo_capacity(problem, priced, cand)
    rate = found["capacity_rps"]
    gauges = dict.fromkeys(METRICS)
    if rate > 0:
        work = replace(problem.workload, num_requests=priced.size.ceiling)
        run = run_once(at_rate(work, rate), priced.coef, priced.config, priced.num_blocks,
                       deployment_of(problem, cand))
        gauges = averages(run.results[0])
    return {"layout": layout.label, "device": layout.device,
            "gpus_per_replica": layout.world_size, "capacity_rps": rate,
            "capacity_rps_ci": found["capacity_rps_ci"],
            "capacity_limited_by": found["capacity_limited_by"],
            "scale_up_thresholds": gauges}


def averages(result: SimResult) -> dict:
    """Time averages over the run, first arrival to last release: requests running and
    waiting (from the engine's queue and system areas) and KV blocks in use over the pool,
    each iteration's sample held until the next."""
    span = result.end_s - min((s.req.arrival_s for s in result.seqs), default=0.0)
    samples = result.kv_samples
    held = sum(used * (nxt[0] - t) for (t, _, used), nxt in zip(samples[:-1], samples[1:],
                                                                      strict=True))
    covered = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
    waiting = result.queue_area / span if span > 0 else 0.0
    in_system = result.system_area / span if span > 0 else 0.0
    return {"vllm:num_requests_running": round(in_system - waiting, 3),
            "vllm:num_requests_waiting": round(waiting, 3),
            "vllm:kv_cache_usage_perc": round(held / covered / result.num_blocks, 4)
            if covered > 0 else 0.0}


def plan_hours(trace: list[tuple[int, float]], replicas: list[dict],
               prices: dict[str, dict]) -> list[dict]:
    """Each hour's cheapest fleet: ceil(rate / capacity) replicas (at least one) of the
    layout that costs least at that rate (the label breaks ties); None where no layout
    serves the rate with its SLOs."""
    usable = [r for r in replicas if r["capacity_rps"] > 0]
    out = []
    for hour, rate in trace:
        options = []
        for rep in usable:
            count = max(1, math.ceil(round(rate / rep["capacity_rps"], 9)))
            gpus = count * rep["gpus_per_replica"]
            cost = round(gpus * prices[rep["device"]]["usd_per_gpu_hour"], 6)
            options.append((cost, rep["layout"], count, gpus))
        best = min(options, default=None)
        out.append({"hour": hour, "rate_per_s": rate,
                    "layout": best and best[1], "replicas": best and best[2],
                    "num_gpus": best and best[3], "cost_usd_per_hour": best and best[0]})
    return out


def run_fleet(problem: Problem, axes, prices: dict[str, dict], trace: list[tuple[int, float]],
              workers: int = 1, ray: str | None = None, on_start=None, on_done=None) -> dict:
    """The fleet report: every layout that fits priced as one replica (in parallel, on the
    process pool or Ray), the cheapest fleet for each hour, and the day's cost. problem's
    rate is where each capacity bisection starts (the trace's peak)."""
    from .search import plan_batches  # search imports this module's neighbours

    batches, space = plan_batches(problem, axes)
    lays = [(problem, b.layout) for b in batches]
    if on_start:
        on_start(len(lays))
    done, interrupted = map_tasks(price_replica, lays, workers, ray, on_done)
    replicas = [done[i] for i in sorted(done)]
    hours = plan_hours(trace, replicas, prices)
    costs = [h["cost_usd_per_hour"] for h in hours]
    return {"rate_trace": [{"hour": h, "rate_per_s": r} for h, r in trace],
            "target_attainment": problem.target_attainment, "prices": prices,
            "space": {"num_layouts": space["num_layouts"], "layouts_fit": len(batches),
                      "layouts_priced": len(replicas)},
            "interrupted": interrupted, "replicas": replicas, "hours": hours,
            "cost_usd_per_day": round(sum(costs), 6) if None not in costs else None,
            "metrics": list(METRICS)}
