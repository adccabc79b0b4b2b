"""The inverse questions: the largest load, smallest parallel size or cheapest dtype that fits.

Nothing here recomputes a ledger line: every candidate is planned by the caller's `probe`
(build_deployment behind it, as `servecap plan` does), and the search only reads `fits`.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import dtypes
from .errors import SpecError
from .plan import Plan
from .ranks import Deployment, Parallel

# Fewer bits lose more precision; at equal bits the float format loses less than the integer
# one for KV (fp8 is vLLM's KV quantization) and for weights (fp8 vs int8 W8A16).
KV_DTYPE_ORDER = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
WEIGHT_DTYPE_ORDER = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")

Probe = Callable[[object], Deployment]


@dataclass(frozen=True)
class Trial:
    """One candidate as the ledger planned it, or the reason the ledger refused to plan it."""

    value: object
    deployment: Deployment | None = None
    refused: str = ""

    @property
    def fits(self) -> bool:
        return self.deployment is not None and self.deployment.fits

    @property
    def plan(self) -> Plan | None:
        return None if self.deployment is None else self.deployment.plan


@dataclass(frozen=True)
class Binding:
    """The ledger line that stops the next candidate, and by how much it overcommits."""

    key: str
    label: str
    num_bytes: int
    over_bytes: int
    why: str


@dataclass(frozen=True)
class Fit:
    """The answer (None: nothing in the range fits), the step past it that does not fit, every
    candidate planned, and the line that binds."""

    question: str
    answer: Trial | None
    beyond: Trial | None
    tried: tuple[Trial, ...]
    binding: Binding | None
    range_end: str = ""


def _try(probe: Probe, value) -> Trial:
    try:
        return Trial(value, probe(value))
    except SpecError as exc:
        return Trial(value, refused=exc.line())


def largest(question: str, probe: Probe, low: int, high: int, range_end: str = "") -> Fit:
    """The largest whole value in [low, high] whose plan fits, assuming `fits` only turns false
    as the value grows: gallop up from `low` (doubling), then bisect the last gap. A refusal
    at `low` is raised; one past `low` counts as not fitting."""
    tried: dict[int, Trial] = {}

    def fits(value: int) -> bool:
        tried.setdefault(value, _try(probe, value))
        return tried[value].fits

    if not fits(low):
        if tried[low].refused:  # the input itself is bad: the ledger's own error
            probe(low)
        return _fit(question, None, tried[low], tried, range_end)
    good, step = low, 1
    while good < high and fits(min(good + step, high)):
        good, step = min(good + step, high), step * 2
    if good == high:
        return _fit(question, tried[good], None, tried, range_end)
    bad = min(good + step, high)
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return _fit(question, tried[good], tried[bad], tried, "")


def first(question: str, probe: Probe, candidates: Iterable, stop: bool = False) -> Fit:
    """The first candidate, in the order given, whose plan fits; every candidate is planned
    (unless `stop`) so the table shows them all. `beyond` is the last one before it that the
    ledger planned and that does not fit (with no answer: the nearest miss). If the ledger
    refuses every candidate, its first refusal is raised: the input itself is bad."""
    tried: list[Trial] = []
    for value in candidates:
        tried.append(_try(probe, value))
        if stop and tried[-1].fits:
            break
    planned = [t for t in tried if t.deployment is not None]
    if not planned and tried:  # the input itself is bad: the ledger's own error
        probe(tried[0].value)
    if not planned:
        raise SpecError("candidates", None, "none to plan")
    answer = next((t for t in planned if t.fits), None)
    if answer is None:  # the nearest miss: the least overcommitted ledger
        beyond = max(planned, key=lambda t: t.plan.free_bytes)
    else:
        before = planned[:planned.index(answer)]
        beyond = before[-1] if before else None
    return _fit(question, answer, beyond, {i: t for i, t in enumerate(tried)}, "")


def _fit(question: str, answer: Trial | None, beyond: Trial | None, tried: dict,
         range_end: str) -> Fit:
    ordered = tuple(tried[k] for k in sorted(tried))  # by value, or in the order tried
    ok = answer.plan if answer is not None else None
    bind = None
    if beyond is not None and beyond.plan is not None:
        bind = binding_line(beyond.plan, ok)
    elif beyond is not None:
        bind = Binding("refused", "the ledger refuses it", 0, 0, beyond.refused)
    return Fit(question, answer, beyond, ordered, bind, range_end if answer else "")


def binding_line(plan: Plan, fitting: Plan | None = None) -> Binding:
    """Which line stops `plan`: the engine's KV pool when the load's KV outgrows its blocks;
    else the line that grew most from the fitting plan (the largest line when there is none),
    with what the device is over by."""
    pool = plan.budget.num_gpu_blocks * plan.budget.block_bytes if plan.budget else None
    kv = plan.line("kv_cache")
    if pool is not None and kv > pool:
        return Binding("kv_cache", "KV cache in use", kv, kv - pool,
                       f"needs more than the engine's {plan.budget.num_gpu_blocks:,} KV blocks")
    before = {item.key: item.num_bytes for item in fitting.lines} if fitting else {}
    line = max(plan.lines, key=lambda item: (item.num_bytes - before.get(item.key, 0), item.key)
               if fitting else (item.num_bytes, item.key))
    over = max(-plan.free_bytes, 0)
    why = "grew most" if fitting else "the largest line"
    if not fitting and plan.line("weights") + plan.line("weight_metadata") > plan.device_bytes:
        line, why = plan.lines[0], "the weights alone exceed the device"
    return Binding(line.key, line.label, line.num_bytes, over, why)


def device_layouts(max_devices: int, num_layers: int, tp: Iterable[int]) -> list[Parallel]:
    """tp x pp layouts in order of GPUs, and at equal GPUs the wider tensor-parallel group first
    (fewer pipeline bubbles); pp never exceeds the layers it splits."""
    sizes = sorted(set(tp))
    return [Parallel(t, n // t) for n in range(1, max_devices + 1)
            for t in reversed(sizes) if n % t == 0 and n // t <= max(num_layers, 1)]


def dtypes_to_try(current: str, order: tuple[str, ...]) -> tuple[str, ...]:
    """The declared dtype, then every other one no wider, least precision lost first: fp16
    beside bf16 is planned too (the same bytes, so it fits exactly where bf16 does)."""
    bits = dtypes.lookup(current, "dtype").bits
    return (current,) + tuple(name for name in order if name != current
                              and dtypes.lookup(name, "dtype").bits <= bits)
