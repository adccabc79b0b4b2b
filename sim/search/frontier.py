"""Ranking, the cheapest deployment meeting the SLOs, the Pareto frontier, what binds."""


def rank_key(row: dict) -> tuple:
    """Meeting the SLOs first, then cost per hour, then the higher SLO attainment at the
    target rate (the wider margin: at steady state every deployment that keeps up serves the
    same tokens/s), then more tokens/s per GPU; the label breaks every remaining tie, so the
    order never depends on who finished first."""
    return (not row["meets_slo"], row["cost_usd_per_hour"] if row["meets_slo"] else 0.0,
            -row["slo_attainment"], -row["tokens_per_s_per_gpu"], row["label"])


def ranked(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=rank_key)


def cheapest(rows: list[dict]) -> dict | None:
    """The lowest cost per hour among candidates meeting every SLO at the target rate (the
    first of them in `rows`, which are ranked)."""
    return next((r for r in rows if r["meets_slo"]), None)


def runner_up(rows: list[dict], best: dict | None) -> dict | None:
    """The next qualifying candidate (rows are ranked) at the cheapest one's cost per hour."""
    if best is None:
        return None
    return next((r for r in rows if r["meets_slo"] and r["label"] != best["label"]
                 and r["cost_usd_per_hour"] == best["cost_usd_per_hour"]), None)


def overlap(a: list[float | None] | None, b: list[float | None] | None) -> bool:
    """Two intervals share a point (a missing one overlaps everything, a missing side reaches
    as far as it can: nothing tells them apart there)."""
    if a is None or b is None:
        return True
    return (a[0] is None or b[1] is None or a[0] <= b[1]) and \
        (b[0] is None or a[1] is None or b[0] <= a[1])


def settle_tie(rows: list[dict], capacities: dict[str, dict]) -> tuple[list[dict], dict | None]:
    """The cheapest against its runner-up at the same cost: apart when their SLO attainment
    intervals do not overlap; else the higher SLO capacity wins when the capacity intervals
    do not overlap (the winner moves first), else a tie. Returns the rows and the tie."""
    best = cheapest(rows)
    other = runner_up(rows, best)
    if other is None or not overlap(best["slo_attainment_ci"], other["slo_attainment_ci"]):
        return rows, None
    a, b = capacities.get(best["label"]), capacities.get(other["label"])
    if a and b and not overlap(a["capacity_rps_ci"], b["capacity_rps_ci"]):
        if b["capacity_rps"] > a["capacity_rps"]:
            rows = [other] + [r for r in rows if r is not other]
        return rows, None
    return rows, {"labels": [best["label"], other["label"]],
                  "why": "the same cost, and their SLO attainment and SLO capacity intervals "
                         "overlap"}


def demote(row: dict, capacity: dict) -> dict:
    """A candidate the re-check failed: its SLO capacity is below the target rate."""
    return row | {"meets_slo": False, "verdict": "misses",
                  "recheck": f"SLO capacity {capacity['capacity_rps']:.3g} req/s "
                             f"({capacity['capacity_limited_by']}) is below the target rate"}


def dominates(a: dict, b: dict) -> bool:
    """a is at least as good on both axes and better on one."""
    ga, ua = a["tokens_per_s_per_gpu"], a["tokens_per_s_per_user"]
    gb, ub = b["tokens_per_s_per_gpu"], b["tokens_per_s_per_user"]
    return ga >= gb and ua >= ub and (ga > gb or ua > ub)


def pareto(rows: list[dict]) -> list[dict]:
    """Candidates no other beats on both tokens/s per GPU and tokens/s per user (those with
    a measured per-user rate), by tokens/s per GPU descending. Sorting first makes it
    O(n log n): a point is kept when its per-user rate beats every point before it."""
    points = sorted((r for r in rows if r["tokens_per_s_per_user"] is not None),
                    key=lambda r: (-r["tokens_per_s_per_gpu"], -r["tokens_per_s_per_user"],
                                   r["label"]))
    out, best_user = [], float("-inf")
    for row in points:
        if row["tokens_per_s_per_user"] > best_user:
            out.append(row)
            best_user = row["tokens_per_s_per_user"]
    return out


def binding_constraint(rows: list[dict], num_fit: int) -> str | None:
    """Why nothing qualifies: memory when no layout fits, else the SLO the closest candidate
    misses most (TTFT or TPOT), or both together; None when a candidate qualifies."""
    if num_fit == 0:
        return "memory"
    if not rows or any(r["meets_slo"] for r in rows):
        return None if rows else "memory"
    best = max(rows, key=lambda r: (r["slo_attainment"], r["label"]))
    if best["ttft_attainment"] < best["tpot_attainment"]:
        return "TTFT"
    if best["tpot_attainment"] < best["ttft_attainment"]:
        return "TPOT"
    return "TTFT and TPOT"
