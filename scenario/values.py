"""A Scenario's text values as numbers: rates, durations, percentiles, its SLO."""

import re

from servecap.ledger.errors import SpecError
from servecap.ledger.units import GB, TB, parse_size
from servecap.sim.metrics import SLO

from .spec import Scenario

_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKMGTP]?)\s*(?:FLOPS|FLOP/S|flops|flop/s)?\s*$")
_PREFIX = {"": 1, "k": 1000, "K": 1000, "M": 1000 * 1000, "G": GB, "T": TB, "P": 1000 * TB}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|ms|s|min)?\s*$")
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, None: 1.0}  # None: only 0


def parse_bandwidth(text: str, field: str = "--bandwidth") -> float:
    """'2000GB/s' or '3.35TB/s' -> bytes per second (decimal units, as vendors state them)."""
    raw = str(text).strip()
    if not raw.lower().endswith("/s"):
        raise SpecError(field, text, "a rate like 2000GB/s or 3.35TB/s")
    rate = float(parse_size(raw[:-2], field))
    if rate <= 0:
        raise SpecError(field, text, "a rate > 0, like 2000GB/s or 3.35TB/s")
    return rate


def parse_flops(text: str, field: str = "--flops") -> float:
    """'990TFLOPS' -> 9.9e14 FLOP/s (decimal prefixes k, M, G, T, P)."""
    match = _RATE.match(str(text))
    if not match:
        raise SpecError(field, text, "a rate like 990TFLOPS or 1.98PFLOPS")
    rate = float(match.group(1)) * _PREFIX[match.group(2)]
    if rate <= 0:
        raise SpecError(field, text, "a rate > 0, like 990TFLOPS")
    return rate


def parse_duration(text: str, field: str) -> float:
    """'500ms' -> 0.5 seconds; units us, ms, s, min. A bare number is refused unless it is 0:
    '--slo-ttft 500' means 500 ms to some readers and 500 s to others."""
    match = _DURATION.match(str(text))
    if not match:
        raise SpecError(field, text, "a duration like 500ms, 0.05s or 2s (>= 0)")
    value = float(match.group(1))
    if match.group(2) is None and value != 0:
        raise SpecError(field, text, f"a duration needs its unit: {match.group(1)}ms or "
                        f"{match.group(1)}s (us, ms, s, min)")
    return value * _SECONDS[match.group(2)]


def slo(scenario: Scenario) -> SLO:
    """The Scenario's latency targets in seconds, and the percentiles reported."""
    def get(text, field):
        return None if text is None else parse_duration(text, field)
    s = scenario.slo
    return SLO(get(s.ttft, "--slo-ttft"), get(s.tpot, "--slo-itl"), get(s.e2e, "--slo-e2e"),
               parse_percentiles(s.percentiles))


def slo_target(target: float) -> float:
    """--target (slo.target): the share of requests that must meet every SLO, in (0, 1]."""
    if isinstance(target, bool) or not isinstance(target, int | float) or not 0 < target <= 1:
        raise SpecError("--target", target, "a share of requests in (0, 1]")
    return target


def parse_percentiles(text: str | None) -> tuple[float, ...]:
    """'50,90,99,99.9' -> (50.0, 90.0, 99.0, 99.9): each in (0, 100], at most 12."""
    if text is None:
        return ()
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or len(values) > 12 or not all(0 < v <= 100 for v in values):
        raise SpecError("--percentiles", text, "comma-separated percentiles in (0, 100], at "
                        "most 12, e.g. 50,90,99,99.9")
    return tuple(sorted(set(values)))
