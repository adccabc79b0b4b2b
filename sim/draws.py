"""A workload's draws, one loop per kind: the source of the compiled kernel (Cython, built by
the package's build as servecap.sim._draws_c with the C types of draws.pxd) and, where that is
absent or was built from another source, the same code run by the interpreter (sim/sampling.py
picks). Each loop computes what CPython's Lib/random.py (3.11) computes, from the same
rng.random() and rng.getrandbits() calls in the same order, so both give the library's own
numbers (tests/sim/test_inline_draws.py holds them to it): compiled, the loop and its
arithmetic run in C (libm's log and exp, the functions math.log and math.exp call, on C
doubles), and only the generator's own methods are Python calls."""

import math
import random
from types import FunctionType

NV_MAGICCONST = random.NV_MAGICCONST  # normalvariate's 4 exp(-1/2) / sqrt(2)
INF = float("inf")


def _as_python() -> None:
    """A Python function where this source runs as Python; Cython's own where compiled."""


# compiled, a request's fields are written through their slots' C setters (draws.pxd's
# _new and _put: what object.__new__ and the slot's __set__ do, without a Python call each);
# as Python, through the slots' __set__
COMPILED = not isinstance(_as_python, FunctionType)


def poisson(rng, rate, count):
    """Arrival times: cumulative rng.expovariate(rate) gaps (-log(1 - U) / rate)."""
    draw, now, out = rng.random, 0.0, []
    for _ in range(count):
        now += -math.log(1.0 - draw()) / rate
        out.append(now)
    return out


def gamma(rng, shape, scale, count):
    """Arrival times: cumulative rng.gammavariate(shape, scale) gaps (the library's own)."""
    draw, now, out = rng.gammavariate, 0.0, []
    for _ in range(count):
        now += draw(shape, scale)
        out.append(now)
    return out


def lognormal(rng, mu, sigma, count, low, high):
    """round(rng.lognormvariate(mu, sigma)) clipped to [low, high] (|low|, |high| <= 2^53):
    exp of normalvariate's Kinderman-Monahan ratio-of-uniforms draw, rounded as round()
    rounds a float (half to even), with the errors math.exp and round() raise (the
    explicit checks: libm's exp returns inf where math.exp raises)."""
    draw, out = rng.random, []
    for _ in range(count):
        while True:
            u1 = draw()
            u2 = 1.0 - draw()
            z = NV_MAGICCONST * (u1 - 0.5) / u2
            if z * z / 4.0 <= -math.log(u2):
                break
        a = mu + z * sigma
        x = math.exp(a)
        if not x < INF:  # x >= 0: inf or NaN
            if x != x:
                raise ValueError("cannot convert float NaN to integer")
            raise OverflowError("math range error" if a < INF else
                                "cannot convert float infinity to integer")
        # the integer below x, one up past a half or at a half to an even integer (x - n is
        # exact)
        n = math.floor(x)
        rest = x - n
        if rest > 0.5 or rest == 0.5 and n % 2 == 1:
            n += 1
        length = low if n < low else high if n > high else int(n)
        out.append(length)
    return out


def uniform(rng, first, last, count, low, high):
    """rng.randint(first, last) clipped to [low, high] (each within 2^53): first + a draw
    below the width by rejection on width.bit_length() random bits
    (Random._randbelow_with_getrandbits)."""
    width = last + 1 - first
    bits, k, out = rng.getrandbits, width.bit_length(), []
    for _ in range(count):
        r = bits(k)
        while r >= width:
            r = bits(k)
        n = first + r
        out.append(low if n < low else high if n > high else n)
    return out


def shares(rng, items, edges, count):
    """Each draw's item: the first whose cumulative share (edges, summed in items' order)
    exceeds a uniform draw, or None."""
    draw, last, picks, out = rng.random, len(edges), (*items, None), []
    for _ in range(count):
        u, j = draw(), 0
        while j < last and u >= edges[j]:
            j += 1
        out.append(picks[j])
    return out


def requests(cls, slots, times, prompts, outputs, groups, tenants):
    """cls(i, t, prompt + prefix, output, group, prefix, tenant, priority) per draw, built
    as object.__new__(cls) with each field set through its slot (slots: cls's slot
    descriptors in field order), past a frozen dataclass's __init__ and its __setattr__ by
    name (half of drawing 100,000 requests as Python, 0.13 of 0.27 CPU-s)."""
    count = len(times)
    if not len(prompts) == len(outputs) == len(groups) == len(tenants) == count:
        raise ValueError("the draws' columns differ in length")
    if COMPILED:
        return _requests_compiled(cls, slots, times, prompts, outputs, groups, tenants)
    set_id, set_arrival, set_prompt, set_output, set_group, set_prefix, set_tenant, \
        set_priority = [slot.__set__ for slot in slots]
    new, out = object.__new__, []
    for i in range(count):
        g, n = groups[i], tenants[i]
        prefix = g.tokens if g else 0
        req = new(cls)
        set_id(req, i)
        set_arrival(req, times[i])
        set_prompt(req, prompts[i] + prefix)
        set_output(req, outputs[i])
        set_group(req, g and g.name)
        set_prefix(req, prefix)
        set_tenant(req, n and n.name)
        set_priority(req, n.priority if n else 0)
        out.append(req)
    return out


def _requests_compiled(cls, slots, times, prompts, outputs, groups, tenants):
    """requests' loop with draws.pxd's C setters (run only where compiled)."""
    s_id, s_arrival, s_prompt, s_output, s_group, s_prefix, s_tenant, s_priority = slots
    out = []
    for i in range(len(times)):
        g, n = groups[i], tenants[i]
        prefix = g.tokens if g else 0
        req = _new(cls)  # noqa: F821 (draws.pxd)
        _put(s_id, req, i)  # noqa: F821
        _put(s_arrival, req, times[i])  # noqa: F821
        _put(s_prompt, req, prompts[i] + prefix)  # noqa: F821
        _put(s_output, req, outputs[i])  # noqa: F821
        _put(s_group, req, g and g.name)  # noqa: F821
        _put(s_prefix, req, prefix)  # noqa: F821
        _put(s_tenant, req, n and n.name)  # noqa: F821
        _put(s_priority, req, n.priority if n else 0)  # noqa: F821
        out.append(req)
    return out
