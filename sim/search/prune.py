"""Pruning by monotonicity: on a ladder of one layout, more GPUs never lower the capacity."""

from collections.abc import Callable

from .space import Candidate

# Why a candidate was not simulated (counted in the report, never silently dropped).
ABOVE = "more GPUs of a layout whose smaller deployment already meets the SLOs"
BELOW = "fewer GPUs of a layout whose larger deployment misses the SLOs"
ROOFLINE = "decode replicas offered more than 1.5 x the step model's decode ceiling"


def climb(ladder: list[Candidate], run: Callable[[Candidate], dict], prune: bool = True,
          floor: int = 0) -> tuple[list[dict], dict[str, int]]:
    """Rows of the candidates simulated and counts of those skipped. With prune, a binary
    search finds the fewest GPUs meeting the SLOs: a candidate above a passing one is never
    cheaper, one below a failing one never passes, and none below `floor` (the first rung
    the decode ceiling lets keep up, search/bound.py) is tried. Without prune, every rung is
    simulated."""
    if not prune:
        return [run(c) for c in ladder], {}
    rows: dict[int, dict] = {}
    low, high = floor, len(ladder) - 1  # the answer lies in [low, high + 1]
    while low <= high:
        mid = (low + high) // 2
        rows[mid] = run(ladder[mid])
        if rows[mid]["meets_slo"]:
            high = mid - 1
        else:
            low = mid + 1
    skipped = {ABOVE: sum(1 for i in range(low + 1, len(ladder)) if i not in rows),
               BELOW: sum(1 for i in range(floor, low) if i not in rows),
               ROOFLINE: min(floor, len(ladder))}
    return [rows[i] for i in sorted(rows)], {k: v for k, v in skipped.items() if v}
