"""The workload spec: arrivals, length distributions, shared-prefix groups and a seed, validated."""

import math
import re
from dataclasses import dataclass, field

from servecap.ledger.errors import SpecError

ARRIVAL_KINDS = ("fixed", "poisson", "gamma", "bursts")
LENGTH_KINDS = ("fixed", "uniform", "lognormal", "empirical")
MIN_CV, MAX_CV = 1e-3, 1e3
# A run holds every request in memory: ~1.7 KB each measured (100,000 requests: 205 MB peak
# RSS), up to ~7.6 KB with several policies and records, so 1,000,000 fits in 8 GB.
MAX_NUM_REQUESTS = 1_000_000
# One request a week to a billion a second; gaps of 1/rate stay finite, and a run ends.
MIN_RATE_PER_S, MAX_RATE_PER_S = 1e-6, 1e9
MAX_SIGMA = 10.0  # ln-length spread: e^(10 x 5 sd) is already past any context
_EXPONENT = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+\s*$")


@dataclass(frozen=True)
class Arrivals:
    """How requests arrive. poisson/gamma: `rate_per_s` (gamma adds `cv`, the coefficient of
    variation of inter-arrival times); bursts: `burst_size` every `interval_s`, spread evenly
    over `spread_s`; fixed: explicit `times_s`."""

    kind: str
    rate_per_s: float = 0.0
    cv: float = 1.0
    times_s: tuple[float, ...] = ()
    burst_size: int = 0
    interval_s: float = 0.0
    spread_s: float = 0.0


@dataclass(frozen=True)
class Lengths:
    """A token-length distribution. fixed: `value`; uniform: integers in [low, high];
    lognormal: `median` and `sigma` (of ln length); empirical: `values` with optional `weights`.
    Every draw is clipped to [min_tokens, max_tokens]."""

    kind: str
    value: int = 0
    low: int = 0
    high: int = 0
    median: float = 0.0
    sigma: float = 0.0
    values: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()
    min_tokens: int = 1
    max_tokens: int = 1 << 30


@dataclass(frozen=True)
class PrefixGroup:
    """A common prompt prefix (a system prompt) of `tokens`, carried by `share` of requests;
    it is prepended to the sampled prompt length."""

    name: str
    tokens: int
    share: float


@dataclass(frozen=True)
class Tenant:
    """A class of requests: `share` of arrivals, served first when its `priority` is lower
    (under the priority scheduling order)."""

    name: str
    share: float
    priority: int = 0


@dataclass(frozen=True)
class Workload:
    """A synthetic workload: `num_requests` arrivals (or all of `times_s` for fixed arrivals)."""

    arrivals: Arrivals
    prompt: Lengths
    output: Lengths
    num_requests: int
    seed: int = 0
    prefix_groups: tuple[PrefixGroup, ...] = ()
    buckets_tokens: tuple[int, ...] = field(default_factory=tuple)
    name: str = "workload"
    tenants: tuple[Tenant, ...] = ()


def workload_from_dict(data: dict) -> Workload:
    """Validate a parsed workload document (YAML mapping) into a Workload; SpecError names the
    field, the value and what is allowed."""
    _keys(data, "", {"name", "seed", "num_requests", "arrivals", "prompt_tokens",
                     "output_tokens", "prefix_groups", "buckets_tokens", "tenants"})
    arrivals = arrivals_from_dict(_mapping(data, "arrivals"), "arrivals")
    count = len(arrivals.times_s) if arrivals.kind == "fixed" else \
        _int(data, "num_requests", None, 1)
    if count > MAX_NUM_REQUESTS:
        raise SpecError("num_requests", count, f"at most {MAX_NUM_REQUESTS:,} requests per run")
    groups = tuple(_prefix_group(g, f"prefix_groups[{i}]")
                   for i, g in enumerate(_list(data, "prefix_groups", [])))
    if sum(g.share for g in groups) > 1 + 1e-9:
        raise SpecError("prefix_groups", [g.share for g in groups], "shares must sum to <= 1")
    tenants = tuple(_tenant(t, f"tenants[{i}]") for i, t in enumerate(_list(data, "tenants", [])))
    if sum(t.share for t in tenants) > 1 + 1e-9:
        raise SpecError("tenants", [t.share for t in tenants], "shares must sum to <= 1")
    buckets = tuple(_int_item(v, f"buckets_tokens[{i}]", 1)
                    for i, v in enumerate(_list(data, "buckets_tokens", [])))
    return Workload(arrivals=arrivals,
                    prompt=lengths_from_dict(_mapping(data, "prompt_tokens"), "prompt_tokens"),
                    output=lengths_from_dict(_mapping(data, "output_tokens"), "output_tokens"),
                    num_requests=count, seed=_int(data, "seed", 0, 0), prefix_groups=groups,
                    buckets_tokens=tuple(sorted(buckets)), name=str(data.get("name", "workload")),
                    tenants=tenants)


def arrivals_from_dict(data: dict, where: str) -> Arrivals:
    kind = _kind(data, where, ARRIVAL_KINDS)
    if kind == "fixed":
        _keys(data, where, {"kind", "times_s"})
        times = tuple(_number_item(t, f"{where}.times_s[{i}]", 0.0)
                      for i, t in enumerate(_list(data, "times_s", None, where)))
        if not times:
            raise SpecError(f"{where}.times_s", [], "at least one arrival time is needed")
        return Arrivals("fixed", times_s=tuple(sorted(times)))
    if kind == "bursts":
        _keys(data, where, {"kind", "burst_size", "interval_s", "spread_s"})
        return Arrivals("bursts", burst_size=_int(data, "burst_size", None, 1, where),
                        interval_s=_positive(data, "interval_s", None, where),
                        spread_s=_number(data, "spread_s", 0.0, 0.0, where))
    _keys(data, where, {"kind", "rate_per_s", "cv"})
    cv = _positive(data, "cv", 1.0, where) if kind == "gamma" else 1.0
    if not MIN_CV <= cv <= MAX_CV:  # gamma shape 1/cv^2 must stay a finite, positive float
        raise SpecError(f"{where}.cv", cv, f"a coefficient of variation in [{MIN_CV:g}, "
                        f"{MAX_CV:g}]")
    rate = _within(data, "rate_per_s", where, MIN_RATE_PER_S, MAX_RATE_PER_S)
    return Arrivals(kind, rate_per_s=rate, cv=cv)


def lengths_from_dict(data: dict, where: str) -> Lengths:
    kind = _kind(data, where, LENGTH_KINDS)
    common = {"kind", "min", "max"}
    low, high = _int(data, "min", 1, 1, where), _int(data, "max", 1 << 30, 1, where)
    if low > high:
        raise SpecError(f"{where}.min", low, f"must be <= max ({high})")
    bounds = {"min_tokens": low, "max_tokens": high}
    if kind == "fixed":
        _keys(data, where, common | {"value"})
        return Lengths("fixed", value=_int(data, "value", None, 1, where), **bounds)
    if kind == "uniform":
        _keys(data, where, common | {"low", "high"})
        lo, hi = _int(data, "low", None, 1, where), _int(data, "high", None, 1, where)
        if lo > hi:
            raise SpecError(f"{where}.low", lo, f"must be <= high ({hi})")
        return Lengths("uniform", low=lo, high=hi, **bounds)
    if kind == "lognormal":
        _keys(data, where, common | {"median", "sigma"})
        return Lengths("lognormal", median=_within(data, "median", where, 1e-3, 2.0**40),
                       sigma=_within(data, "sigma", where, 0.0, MAX_SIGMA), **bounds)
    _keys(data, where, common | {"values", "weights"})
    values = tuple(_int_item(v, f"{where}.values[{i}]", 1)
                   for i, v in enumerate(_list(data, "values", None, where)))
    if not values:
        raise SpecError(f"{where}.values", [], "an empirical distribution needs at least one "
                        "length")
    weights = tuple(_number_item(w, f"{where}.weights[{i}]", 0.0)
                    for i, w in enumerate(_list(data, "weights", [], where)))
    if weights and (len(weights) != len(values) or sum(weights) <= 0):
        raise SpecError(f"{where}.weights", list(weights), f"{len(values)} non-negative "
                        "weights with a positive sum, one per value")
    return Lengths("empirical", values=values, weights=weights, **bounds)


def _prefix_group(data: object, where: str) -> PrefixGroup:
    share = _shared_class(data, where, ("name", "tokens", "share"))
    return PrefixGroup(str(data.get("name", where)), _int(data, "tokens", None, 1, where), share)


def _tenant(data: object, where: str) -> Tenant:
    share = _shared_class(data, where, ("name", "share", "priority"))
    return Tenant(str(data.get("name", where)), share, _int(data, "priority", 0, 0, where))


def _shared_class(data: object, where: str, keys: tuple[str, ...]) -> float:
    """A request class (prefix group, tenant): a mapping of `keys`; returns its share of
    requests, a fraction in [0, 1]."""
    if not isinstance(data, dict):
        raise SpecError(where, data, f"a mapping with {', '.join(keys[:-1])} and {keys[-1]}")
    _keys(data, where, set(keys))
    share = _number(data, "share", None, 0.0, where)
    if share > 1:
        raise SpecError(f"{where}.share", share, "a fraction of requests in [0, 1]")
    return share


def _keys(data: dict, where: str, allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(_at(where, unknown[0]), data[unknown[0]],
                        "unknown key; allowed keys: " + ", ".join(sorted(allowed)))


def _kind(data: dict, where: str, kinds: tuple[str, ...]) -> str:
    kind = data.get("kind")
    if kind not in kinds:
        raise SpecError(f"{where}.kind", kind, "one of " + ", ".join(kinds))
    return kind


def _mapping(data: dict, key: str) -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        raise SpecError(key, value, "required: a mapping with a `kind`")
    return value


def _list(data: dict, key: str, default, where: str = "") -> list:
    value = data.get(key, default)
    if not isinstance(value, list):
        raise SpecError(_at(where, key), value, "required: a list")
    return value


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _int(data: dict, key: str, default, minimum: int, where: str = "") -> int:
    if key not in data and default is not None:
        return default
    return _int_item(data.get(key), _at(where, key), minimum)


def _int_item(value: object, field_name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(field_name, value, f"a whole number >= {minimum}")
    return value


def _number(data: dict, key: str, default, minimum: float, where: str = "") -> float:
    if key not in data and default is not None:
        return default
    return _number_item(data.get(key), _at(where, key), minimum)


def _number_item(value: object, field_name: str, minimum: float) -> float:
    if isinstance(value, str) and _EXPONENT.match(value):
        value = float(value)  # YAML 1.2 reads 1e-3 as a number; PyYAML (YAML 1.1) as text
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < minimum:
        raise SpecError(field_name, value, f"a finite number >= {minimum:g}")
    return float(value)


def _within(data: dict, key: str, where: str, low: float, high: float) -> float:
    """A required number in [low, high]: bounds that keep the sampler's arithmetic finite. One
    rule and one message for every bad value (a negative rate was told '>= 0', and 0 then
    '[1e-06, 1e+09]')."""
    value = data.get(key)
    if isinstance(value, str) and _EXPONENT.match(value):
        value = float(value)  # as _number_item reads it
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not low <= value <= high:  # NaN fails the comparison too
        raise SpecError(_at(where, key), value, f"a number in [{low:g}, {high:g}]")
    return float(value)


def _positive(data: dict, key: str, default, where: str = "") -> float:
    value = _number(data, key, default, 0.0, where)
    if value <= 0:
        raise SpecError(_at(where, key), value, "must be > 0")
    return value
