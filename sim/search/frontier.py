"""Ranking, the cheapest deployment meeting the SLOs, the Pareto frontier, what binds."""


def rank_key(row: dict) -> tuple:
    """Meeting the SLOs first, then cost per hour, then more tokens/s per GPU; the label
    breaks every remaining tie, so the order never depends on who finished first."""
    return (not row["meets_slo"], row["cost_usd_per_hour"] if row["meets_slo"] else 0.0,
            -row["slo_attainment"] if not row["meets_slo"] else 0.0,
            -row["tokens_per_s_per_gpu"], row["label"])


def ranked(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=rank_key)


def cheapest(rows: list[dict]) -> dict | None:
    """The lowest cost per hour among candidates meeting every SLO at the target rate."""
    return next((r for r in ranked(rows) if r["meets_slo"]), None)


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
