"""The search end to end: prune by memory, run the batches, rank, frontier, launch lines."""

import time
from collections.abc import Callable

from .batch import Batch
from .evaluate import row_capacity
from .execute import map_tasks, run_all, sigterm_as_sigint
from .frontier import binding_constraint, cheapest, demote, pareto, ranked, runner_up, settle_tie
from .launch import launch_lines
from .memory import MemoryCheck
from .problem import Problem
from .space import Axes, ladders, layouts


def plan_batches(problem: Problem, axes: Axes) -> tuple[list[Batch], dict]:
    """Every layout's ladders; a layout that fails memory (or is invalid) is dropped with all
    its candidates, counted by reason."""
    check, batches = MemoryCheck(problem), []
    counts = {"num_layouts": 0, "num_candidates": 0, "memory_pruned": 0, "invalid": 0}
    examples: dict[str, str] = {}
    for lay in layouts(axes):
        steps = tuple(tuple(ladder) for ladder in ladders(lay, axes))
        size = sum(len(s) for s in steps)
        counts["num_layouts"] += 1
        counts["num_candidates"] += size
        verdict = check.check(lay, problem.context_tokens)
        if verdict.fits:
            batches.append(Batch(lay, steps))
            continue
        kind = "memory_pruned" if verdict.reason.startswith("memory") else "invalid"
        counts[kind] += size
        examples.setdefault(kind, f"{lay.label}: {verdict.reason}")
    return batches, counts | {"examples": examples, "num_ledgers": check.num_ledgers,
                              "memory_inferred": check.num_inferred}


def run_search(problem: Problem, axes: Axes, prices: dict[str, dict], model_id: str,
               workers: int = 1, ray: str | None = None, prune: bool = True,
               on_start: Callable[[int], None] | None = None,
               on_done: Callable[[], None] | None = None) -> dict:
    """The report: space counts, ranked rows, cheapest, frontier, launch lines, what binds.
    SIGTERM is Ctrl-C for the whole search, the re-check of the answers included."""
    with sigterm_as_sigint():
        return _search(problem, axes, prices, model_id, workers, ray, prune, on_start, on_done)


def _search(problem, axes, prices, model_id, workers, ray, prune, on_start, on_done) -> dict:
    started = time.perf_counter()
    batches, space = plan_batches(problem, axes)
    if on_start:
        on_start(len(batches))
    done, interrupted = run_all(problem, batches, workers, ray, prune, on_done)
    rows, skipped = [], {}
    for i in sorted(done):
        for row in done[i]["rows"]:
            price = prices[row["device"]]["usd_per_gpu_hour"]
            rows.append(row | {"cost_usd_per_hour": round(price * row["num_gpus"], 6)})
        for reason, n in done[i]["skipped"].items():
            skipped[reason] = skipped.get(reason, 0) + n
    rows, stopped, tie, capacity_cpu = with_capacities(problem, ranked(rows), interrupted,
                                                       workers, ray)
    interrupted = interrupted or stopped
    best = cheapest(rows)
    front = pareto(rows)
    utilization = 1 - problem.safety_fraction
    return {
        "rate_per_s": problem.rate_per_s, "target_attainment": problem.target_attainment,
        "max_model_len": problem.context_tokens, "policy": problem.policy,
        "max_gpus": axes.max_gpus, "prices": prices,
        "space": space | {"skipped_monotonic": skipped, "simulated": len(rows),
                          "num_batches": len(batches), "batches_finished": len(done),
                          "worker_cpu_s": round(sum(d["cpu_s"] for d in done.values())
                                                + capacity_cpu, 3)},
        "interrupted": interrupted,
        "binding_constraint": None if interrupted else binding_constraint(rows, len(batches)),
        "cheapest": best, "tie": tie, "steady_state": steady(best),
        "launch": launch_lines(model_id, best, problem.context_tokens, utilization)
        if best else None,
        "frontier": [r | {"launch": launch_lines(model_id, r, problem.context_tokens,
                                                 utilization)} if r["meets_slo"] else r
                     for r in front],
        "candidates": rows,
        "time_model_notes": sorted({n for r in rows for n in r["time_model_notes"]}),
        "elapsed_s": round(time.perf_counter() - started, 3),
    }


def steady(best: dict | None) -> bool | None:
    """Whether the answer holds at steady state: its run at the target rate and, when
    bisected, its SLO capacity's run (None: no answer)."""
    if best is None:
        return None
    return best["steady_state"] and best.get("capacity_steady_state") is not False


CAPACITY_KEYS = ("capacity_rps", "capacity_rps_ci", "capacity_steady_state",
                 "capacity_limited_by")


def with_capacities(problem: Problem, rows: list[dict], interrupted: bool, workers: int = 1,
                    ray: str | None = None) -> tuple[list[dict], bool, dict | None, float]:
    """Re-check the answers: the cheapest qualifying row, the runner-up at its cost and the
    qualifying frontier points get their SLO capacity with its interval (capacity.capacity,
    every probe run until steady, nothing at or above the candidate's saturation rate). An
    answer whose capacity falls below the target rate is demoted (it misses after all) and
    the next one is checked. The cheapest and its runner-up tie when their tokens/s per GPU
    intervals overlap: then the higher capacity wins if the two capacity intervals do not
    overlap, and otherwise both are reported as a tie. The rest carry None (a dozen
    simulations each is the bulk of a search's time otherwise). With several workers the
    capacities the first picks ask for are bisected side by side first (the_picks); the
    checks then read them, and compute only what a demotion newly asks. A Ctrl-C here keeps
    what was found so far. Returns the rows, whether interrupted, the tie (None: no tie)
    and the CPU seconds the workers spent on capacities."""
    found: dict[str, dict] = {}
    if not problem.capacity or interrupted:
        return [_with(r, found) for r in rows], interrupted, None, 0.0
    tie, cpu = None, 0.0
    try:
        ahead, cpu = _ahead(problem, rows, workers, ray)
        rows = _confirm(problem, rows, found, lambda rs: [cheapest(rs)], ahead)
        rows = _confirm(problem, rows, found, lambda rs: [runner_up(rs, cheapest(rs))], ahead)
        rows = _confirm(problem, rows, found, lambda rs: [r for r in pareto(rs)
                                                          if r["meets_slo"]], ahead)
        rows, tie = settle_tie(rows, found)
    except KeyboardInterrupt:
        interrupted = True
    return [_with(r, found) for r in rows], interrupted, tie, cpu


def the_picks(rows: list[dict]) -> list[dict]:
    """The rows with_capacities checks before any demotion: the cheapest qualifying row, its
    runner-up and the qualifying frontier, each once."""
    best = cheapest(rows)
    out: dict[str, dict] = {}
    for row in [best, runner_up(rows, best), *pareto(rows)]:
        if row is not None and row["meets_slo"]:
            out.setdefault(row["label"], row)
    return list(out.values())


def _ahead(problem: Problem, rows: list[dict], workers: int, ray: str | None
           ) -> tuple[dict[str, dict], float]:
    """the_picks' capacities, bisected side by side on the workers (a row's capacity
    depends on that row alone, so where it runs does not change it), and the workers' CPU
    seconds; nothing with one worker."""
    picks = the_picks(rows)
    if (workers <= 1 and ray is None) or len(picks) < 2:
        return {}, 0.0
    done, interrupted = map_tasks(timed_capacity, [(problem, r) for r in picks], workers, ray)
    if interrupted:
        raise KeyboardInterrupt
    return ({picks[i]["label"]: cap for i, (cap, _) in done.items()},
            sum(cpu for _, cpu in done.values()))


def timed_capacity(problem: Problem, row: dict) -> tuple[dict, float]:
    """row_capacity and the CPU seconds it took where it ran."""
    start = time.process_time()
    cap = row_capacity(problem, row)
    return cap, time.process_time() - start


def _confirm(problem: Problem, rows: list[dict], found: dict,
             pick: Callable[[list[dict]], list], ahead: dict[str, dict]) -> list[dict]:
    """Capacities of the rows `pick` chooses (taken from `ahead` where it has them),
    demoting (and choosing again) any whose capacity is below the target rate."""
    while True:
        chosen = [r for r in pick(rows) if r is not None and r["meets_slo"]]
        demoted = False
        for row in chosen:
            if row["label"] not in found:
                found[row["label"]] = ahead[row["label"]] if row["label"] in ahead \
                    else row_capacity(problem, row)
            if found[row["label"]]["capacity_rps"] < problem.rate_per_s:
                rows = ranked([demote(r, found[r["label"]]) if r["label"] == row["label"]
                               else r for r in rows])
                demoted = True
        if not demoted:
            return rows


def _with(row: dict, found: dict) -> dict:
    cap = found.get(row["label"], {})
    return row | {k: cap.get(k) for k in CAPACITY_KEYS}
