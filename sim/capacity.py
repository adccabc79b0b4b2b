"""SLO capacity, one definition: the highest arrival rate whose SLO attainment meets the
target, found by bisection to CAPACITY_TOLERANCE, with its 95 % interval.

A rate meets the target when its run completed requests, its queue did not grow through the
run, and the share of requests meeting every SLO in its measured window is at least the
target. Rates are probed from a start: doubled while they meet, halved while they fail, then
bisected until the bracket is within CAPACITY_TOLERANCE of its low end; the capacity is the
bracket's low end, a rate shown to meet. The interval inverts the attainment's: its low end
is the highest rate whose attainment interval lies wholly at or above the target (surely
meets), its high end the highest rate whose interval still reaches it (may meet), each
bisected to the same tolerance. When no rate above the capacity failed (it is limited by the
saturation rate, or met up to the highest rate probed) the high end is None: the bisection
stopped at that cap, which bounds no attainment interval, so the interval is not estimated
there (it would read as zero width). `sweep`, `search`, `cost` and `fit` call this.
"""

from collections.abc import Callable

CAPACITY_TOLERANCE = 0.02  # bisection stops when the bracket is within 2 % of its low end
MAX_STEPS = 12  # doublings (or halvings) from the start: 4,096x either way


def meets(summary: dict, target: float) -> bool:
    """The point estimate: the run's measured attainment reaches the target."""
    return summary["completed"] > 0 and not summary["overloaded"] \
        and summary["slo_attainment"] >= target


def surely_meets(summary: dict, target: float) -> bool:
    ci = summary.get("slo_attainment_ci")
    return meets(summary, target) and ci is not None and ci[0] >= target


def may_meet(summary: dict, target: float) -> bool:
    ci = summary.get("slo_attainment_ci") or [summary["slo_attainment"]] * 2
    return summary["completed"] > 0 and not summary["overloaded"] and ci[1] >= target


def verdict(summary: dict, target: float) -> str:
    """meets (the attainment's interval is at or above the target), misses (wholly below,
    or the queue grew), or marginal (the interval straddles it: not a pass)."""
    if surely_meets(summary, target):
        return "meets"
    return "marginal" if may_meet(summary, target) else "misses"


def capacity(point: Callable[[float], dict], target: float, start_rps: float,
             saturation_rps: float | None = None, tolerance: float = CAPACITY_TOLERANCE,
             probes: dict[float, dict] | None = None) -> dict:
    """{capacity_rps, capacity_rps_ci, capacity_tolerance, capacity_steady_state,
    capacity_limited_by, capacity_probes}; point(rate) is the measured summary at a rate
    (deterministic, so each rate is simulated once; `probes` may hold some already). A rate
    at or above saturation_rps (the throughput with every request offered at once) fails
    unsimulated: at utilisation 1 an open-loop queue grows without bound, however short a
    run is too short to show it."""
    probes = {} if probes is None else probes
    most = saturation_rps if saturation_rps is not None else float("inf")

    def test(check: Callable[[dict, float], bool]) -> Callable[[float], bool]:
        def holds(rate: float) -> bool:
            if rate >= most:
                return False
            if rate not in probes:
                probes[rate] = point(rate)
            return check(probes[rate], target)
        return holds

    low = highest(test(meets), start_rps, tolerance)
    sure = highest(test(surely_meets), low or start_rps, tolerance, list(probes))
    maybe = highest(test(may_meet), low or start_rps, tolerance, list(probes))
    above = min((r for r in probes if low < r < most and not meets(probes[r], target)),
                default=None)
    # no rate above the capacity failed: the upward bisections stopped at the saturation cap
    # (or the last doubling), not at an attainment interval, so the high end is not estimated
    high = None if low and above is None else max(maybe, low)
    return {"capacity_rps": low, "capacity_rps_ci": [min(sure, low), high],
            "capacity_tolerance": tolerance,
            "capacity_steady_state": bool(low) and probes[low]["steady_state"],
            "capacity_limited_by": _limited_by(probes.get(above), low, most),
            "capacity_probes": [probe_row(r, probes[r], target) for r in sorted(probes)]}


def highest(holds: Callable[[float], bool], start: float, tolerance: float,
            probed: list[float] = ()) -> float:
    """The highest rate where `holds` (taken as monotone: true below some rate), to
    `tolerance` of itself: 0.0 when it fails down to start / 2^MAX_STEPS, the last doubling
    when it holds up to start x 2^MAX_STEPS. Rates already `probed` bracket it first when
    they can (holds is cached by the caller, so they cost nothing)."""
    good = [r for r in probed if holds(r)]
    bad = [r for r in probed if r > max(good, default=0.0) and not holds(r)]
    if good and bad:
        low, high = max(good), min(bad)
    elif holds(start):
        low, high = start, None
        for _ in range(MAX_STEPS):
            if not holds(2 * low):
                high = 2 * low
                break
            low *= 2
        if high is None:
            return low
    else:
        high, low = start, None
        for _ in range(MAX_STEPS):
            if holds(high / 2):
                low = high / 2
                break
            high /= 2
        if low is None:
            return 0.0
    return _bisect(holds, low, high, tolerance)


def _bisect(holds: Callable[[float], bool], low: float, high: float, tolerance: float
            ) -> float:
    while high - low > tolerance * low:
        mid = (low + high) / 2
        if holds(mid):
            low = mid
        else:
            high = mid
    return low


def _limited_by(failed: dict | None, low: float, most: float) -> str:
    """Why the next rate up failed: the SLO, a queue that grew through the run, or the
    saturation rate."""
    if failed is None:
        if most < float("inf"):
            return "saturation"
        return "none: met up to the highest rate probed" if low else "slo"
    return "queue grows" if failed["overloaded"] else "slo"


def probe_row(rate: float, summary: dict, target: float) -> dict:
    """One probed rate as the report lists it."""
    return {"rate_per_s": rate, "slo_attainment": summary["slo_attainment"],
            "slo_attainment_ci": summary.get("slo_attainment_ci"),
            "steady_state": summary["steady_state"], "overloaded": summary["overloaded"],
            "measured_requests": summary["measured_requests"],
            "simulated_requests": summary.get("simulated_requests"),
            "verdict": verdict(summary, target)}
