"""Draw a request list from a Workload: arrival times, prompt/output lengths, prefix groups."""

import math
import random
from dataclasses import dataclass, fields, replace

from . import draws as _draws_python
from .gcpause import paused
from .stamp import compiled
from .workload import Arrivals, Lengths, Workload

# the draws' loops (sim/draws.py): the compiled kernel (servecap.sim._draws_c) where the build
# made it from that source as it is, else the source as Python; the same numbers either way
COMPILED_DRAWS = compiled("draws")
DRAWS = COMPILED_DRAWS or _draws_python
# the kernel's lengths and their bounds are 64-bit integers, each exact as a double: larger
# ones (or other types) take the library's own calls, which give the same numbers
EXACT = 1 << 53


@dataclass(frozen=True, slots=True)
class Request:
    """One request as offered: arrival time (s), prompt tokens (prefix included), output tokens
    to generate, and its shared-prefix group (None: no shared prefix)."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_group: str | None = None
    prefix_tokens: int = 0
    tenant: str | None = None
    priority: int = 0


def draw_requests(workload: Workload) -> list[Request]:
    """Deterministic for a given workload (its seed): one Random drives every draw."""
    with paused():  # sim/gcpause.py
        return _draw(workload)


def _draw(workload: Workload) -> list[Request]:
    rng = random.Random(workload.seed)
    times = arrival_times(workload.arrivals, workload.num_requests, rng)
    prompts = draw_lengths(workload.prompt, len(times), rng)
    outputs = draw_lengths(workload.output, len(times), rng)
    groups = _draw_shares(workload.prefix_groups, len(times), rng)
    tenants = _draw_shares(workload.tenants, len(times), rng)
    return _requests(times, prompts, outputs, groups, tenants)


# Request's slots in field order: each request is built past the frozen dataclass's __init__
# (object.__setattr__ by name for every field) and its fields set through them
_SLOTS = tuple(getattr(Request, f.name) for f in fields(Request))


def _requests(times: list, prompts: list, outputs: list, groups: list,
              tenants: list) -> list[Request]:
    """Request(i, t, prompt + prefix, output, group, prefix, tenant, priority) per draw."""
    return DRAWS.requests(Request, _SLOTS, times, prompts, outputs, groups, tenants)


def at_rate(workload: Workload, rate_per_s: float) -> list[Request]:
    """The workload's lengths and seed at another offered rate: gamma keeps its CV, every
    other arrival process becomes Poisson."""
    cv = workload.arrivals.cv if workload.arrivals.kind == "gamma" else 1.0
    kind = "gamma" if workload.arrivals.kind == "gamma" else "poisson"
    return draw_requests(replace(workload, arrivals=Arrivals(kind, rate_per_s, cv)))


def arrival_times(arrivals: Arrivals, count: int, rng: random.Random) -> list[float]:
    """Seconds from the first acceptance window. Poisson: exponential gaps of mean 1/rate;
    gamma: shape k = 1/cv^2, scale 1/(rate k), so the mean gap is 1/rate and the gaps' CV is cv
    (no clipping); bursts: `burst_size` at each multiple of interval_s, spread over spread_s."""
    if arrivals.kind == "fixed":
        return list(arrivals.times_s)
    if arrivals.kind == "bursts":
        step = arrivals.spread_s / arrivals.burst_size
        return [(i // arrivals.burst_size) * arrivals.interval_s + (i % arrivals.burst_size) * step
                for i in range(count)]
    if arrivals.kind == "poisson":
        return DRAWS.poisson(rng, arrivals.rate_per_s, count)
    shape = 1.0 / (arrivals.cv * arrivals.cv)
    scale = 1.0 / (arrivals.rate_per_s * shape)
    return DRAWS.gamma(rng, shape, scale, count)


def _exact(*values) -> bool:
    """Whether each is an int within 2^53, as the kernel's loops take them."""
    return all(type(v) is int and -EXACT <= v <= EXACT for v in values)


def draw_lengths(dist: Lengths, count: int, rng: random.Random) -> list[int]:
    """Token counts from the distribution, each clipped to [min_tokens, max_tokens]."""
    low, high = dist.min_tokens, dist.max_tokens
    if dist.kind == "fixed":
        raw = [dist.value] * count
    elif dist.kind == "uniform":
        if _exact(dist.low, dist.high, low, high) and dist.high >= dist.low:
            return DRAWS.uniform(rng, dist.low, dist.high, count, low, high)
        raw = [rng.randint(dist.low, dist.high) for _ in range(count)]  # or its own error
    elif dist.kind == "lognormal":
        mu = math.log(dist.median)
        if _exact(low, high):
            return DRAWS.lognormal(rng, mu, dist.sigma, count, low, high)
        raw = [round(rng.lognormvariate(mu, dist.sigma)) for _ in range(count)]
    else:
        raw = rng.choices(dist.values, weights=dist.weights or None, k=count)
    return [min(max(n, low), high) for n in raw]


def _draw_shares(items: tuple, count: int, rng: random.Random) -> list:
    """Each request belongs to the first item whose cumulative share covers a uniform draw,
    or to none; no draws are made when there are no items (seeds stay comparable)."""
    if not items:
        return [None] * count
    edges, edge = [], 0.0
    for item in items:
        edge += item.share
        edges.append(edge)
    return DRAWS.shares(rng, tuple(items), tuple(edges), count)
