"""How long a run at a rate needs to be: sized by request lifetimes, between a floor and a
ceiling, until its window is steady (sim/steady.py) or the ceiling is reached.

A window needs MIN_LIFETIMES request lifetimes of arrivals after a warm-up of a few more: at
rate r, r x lifetime x (MIN_LIFETIMES + WARMUP_LIFETIMES) requests. The first run has the
floor's requests (or what one request's unloaded lifetime calls for, when a caller gives it:
its prefill and decode steps alone on the device); it measures how long requests live under
this load, and a run that is not yet steady is run again at the size those lifetimes call
for (at least twice the size), up to the ceiling. A run settled another way stops early: a
queue that grows through the run only grows longer, and a caller may stop one that already
misses what it is asked.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from servecap.ledger.errors import SpecError

from .roofline import Coefficients
from .sampling import Request, at_rate
from .steady import MIN_LIFETIMES
from .step_model import prefill_pairs, step_s
from .workload import Workload

DEFAULT_FLOOR_REQUESTS = 200
WARMUP_LIFETIMES = 5
MAX_REQUESTS = 1_000_000


@dataclass(frozen=True)
class RunSize:
    """ceiling: the most requests one run may simulate (--num-requests); floor: the fewest
    (at most the ceiling); lifetime_s: one request's unloaded lifetime (0: start at the
    floor)."""

    ceiling: int
    floor: int = DEFAULT_FLOOR_REQUESTS
    lifetime_s: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.ceiling, bool) or not isinstance(self.ceiling, int) \
                or not 1 <= self.ceiling <= MAX_REQUESTS:
            raise SpecError("--num-requests", self.ceiling,
                            f"a whole number in 1..{MAX_REQUESTS:,}")

    @property
    def lowest(self) -> int:
        return min(self.floor, self.ceiling)

    def first(self, rate_per_s: float) -> int:
        """Requests of the first run at rate_per_s: the lifetimes a steady window needs."""
        want = math.ceil(rate_per_s * self.lifetime_s * (MIN_LIFETIMES + WARMUP_LIFETIMES))
        return max(self.lowest, min(want, self.ceiling))


def unloaded_lifetime_s(coef: Coefficients, requests: list[Request]) -> float:
    """Seconds the workload's mean request lives alone on one engine: its prefill as one step,
    then one decode step per further token at the mean context."""
    if not requests:
        return 0.0
    prompt = round(sum(r.prompt_tokens for r in requests) / len(requests))
    output = round(sum(r.output_tokens for r in requests) / len(requests))
    prefill = step_s(coef, prompt, 0, prefill_pairs(0, prompt), 0)
    return prefill + max(output - 1, 0) * step_s(coef, 0, 1, 0, prompt + output // 2)


def run_size(coef: Coefficients, requests: list[Request], ceiling: int,
             from_floor: bool = False) -> RunSize:
    """The sizing of runs like `requests` (their mean lengths price the unloaded lifetime)
    on one engine priced by coef, with at most `ceiling` requests a run; from_floor: the
    first run has the floor's requests whatever the lifetime (a search, where most runs
    settle a miss on their first and smallest)."""
    return RunSize(ceiling, lifetime_s=0.0 if from_floor else
                   unloaded_lifetime_s(coef, requests))


def settled(summary: dict) -> bool:
    """Nothing a longer run would change: steady, or a queue that grows through the run."""
    return summary["steady_state"] or summary["overloaded"]


def steady_point(workload: Workload, rate_per_s: float, run: Callable[[list[Request]], dict],
                 size: RunSize, done: Callable[[dict], bool] = settled) -> dict:
    """The summary of the workload at rate_per_s (Poisson, or gamma at its CV), from the
    first run `done` accepts or the ceiling's (its `simulated_requests` says how many
    requests that run had)."""
    count = size.first(rate_per_s)
    while True:
        summary = run(at_rate(replace(workload, num_requests=count), rate_per_s))
        if count >= size.ceiling or done(summary):
            return summary
        count = min(max(2 * count, _needed(summary, rate_per_s)), size.ceiling)


def _needed(summary: dict, rate_per_s: float) -> int:
    """Requests a steady window needs at the lifetimes this run measured (its requests' mean
    end-to-end latency): longer than the unloaded guess once requests share the device."""
    mean_ms = (summary.get("e2e_ms") or {}).get("mean") or 0.0
    return math.ceil(rate_per_s * mean_ms / 1000 * (MIN_LIFETIMES + WARMUP_LIFETIMES))
