"""Draw a request list from a Workload: arrival times, prompt/output lengths, prefix groups."""

import math
import random
from dataclasses import dataclass, fields, replace

from .gcpause import paused
from .workload import Arrivals, Lengths, Workload


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


# Request's slots, each set through its own descriptor: the frozen dataclass's __init__ goes
# through object.__setattr__ by name for every field, which was half of drawing 100,000
# requests (0.13 of 0.27 CPU-s); the same objects (fields, equality, hash) in about half that
_SETTERS = tuple(getattr(Request, f.name).__set__ for f in fields(Request))


def _requests(times: list, prompts: list, outputs: list, groups: list,
              tenants: list) -> list[Request]:
    """Request(i, t, prompt + prefix, output, group, prefix, tenant, priority) per draw."""
    set_id, set_arrival, set_prompt, set_output, set_group, set_prefix, set_tenant, \
        set_priority = _SETTERS
    new, out = object.__new__, []
    for i, (t, p, o, g, n) in enumerate(zip(times, prompts, outputs, groups, tenants,
                                            strict=True)):
        req = new(Request)
        set_id(req, i)
        set_arrival(req, t)
        set_prompt(req, p + (g.tokens if g else 0))
        set_output(req, o)
        set_group(req, g and g.name)
        set_prefix(req, g.tokens if g else 0)
        set_tenant(req, n and n.name)
        set_priority(req, n.priority if n else 0)
        out.append(req)
    return out


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
        return _poisson(rng, arrivals.rate_per_s, count)
    shape = 1.0 / (arrivals.cv * arrivals.cv)
    scale = 1.0 / (arrivals.rate_per_s * shape)
    now, out = 0.0, []
    for _ in range(count):
        now += rng.gammavariate(shape, scale)
        out.append(now)
    return out


# The three draws a workload makes per request, each written out in its loop as CPython's
# Lib/random.py (3.11) computes it, from the same rng.random() and rng.getrandbits() calls
# in the same order: the same numbers (tests/sim/test_inline_draws.py holds them to the
# library's own) without two or three Python calls per draw, which were 0.16 of the 0.22
# CPU-s that 100,000 chat requests took to draw.

def _poisson(rng: random.Random, rate: float, count: int) -> list[float]:
    """Arrival times: cumulative rng.expovariate(rate) gaps (-log(1 - U) / rate)."""
    draw, now, out = rng.random, 0.0, []
    append = out.append
    for _ in range(count):
        now += -math.log(1.0 - draw()) / rate
        append(now)
    return out


def _lognormal(rng: random.Random, mu: float, sigma: float, count: int, low: int,
               high: int) -> list[int]:
    """round(rng.lognormvariate(mu, sigma)) clipped to [low, high]: exp of normalvariate's
    Kinderman-Monahan ratio-of-uniforms draw (random.NV_MAGICCONST)."""
    draw, magic, log, out = rng.random, random.NV_MAGICCONST, math.log, []
    append = out.append
    for _ in range(count):
        while True:
            u1 = draw()
            u2 = 1.0 - draw()
            z = magic * (u1 - 0.5) / u2
            if z * z / 4.0 <= -log(u2):
                break
        n = round(math.exp(mu + z * sigma))
        n = low if n < low else n
        append(high if n > high else n)
    return out


def _uniform(rng: random.Random, first: int, last: int, count: int, low: int,
             high: int) -> list[int]:
    """rng.randint(first, last) clipped to [low, high]: first + a draw below the width by
    rejection on width.bit_length() random bits (Random._randbelow_with_getrandbits)."""
    width = last + 1 - first
    bits, k, out = rng.getrandbits, width.bit_length(), []
    append = out.append
    for _ in range(count):
        r = bits(k)
        while r >= width:
            r = bits(k)
        n = first + r
        n = low if n < low else n
        append(high if n > high else n)
    return out


def draw_lengths(dist: Lengths, count: int, rng: random.Random) -> list[int]:
    """Token counts from the distribution, each clipped to [min_tokens, max_tokens]."""
    low, high = dist.min_tokens, dist.max_tokens
    if dist.kind == "fixed":
        raw = [dist.value] * count
    elif dist.kind == "uniform":
        if type(dist.low) is int and type(dist.high) is int and dist.high >= dist.low:
            return _uniform(rng, dist.low, dist.high, count, low, high)
        raw = [rng.randint(dist.low, dist.high) for _ in range(count)]  # its own error
    elif dist.kind == "lognormal":
        return _lognormal(rng, math.log(dist.median), dist.sigma, count, low, high)
    else:
        raw = rng.choices(dist.values, weights=dist.weights or None, k=count)
    return [min(max(n, low), high) for n in raw]


def _draw_shares(items: tuple, count: int, rng: random.Random) -> list:
    """Each request belongs to the first item whose cumulative share covers a uniform draw,
    or to none; no draws are made when there are no items (seeds stay comparable)."""
    if not items:
        return [None] * count
    out = []
    for _ in range(count):
        u, edge, pick = rng.random(), 0.0, None
        for item in items:
            edge += item.share
            if u < edge:
                pick = item
                break
        out.append(pick)
    return out
