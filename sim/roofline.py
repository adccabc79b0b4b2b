"""Iteration time from a roofline of the device and the model: every coefficient visible."""

import math
from dataclasses import asdict, dataclass, fields, replace

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Plan


@dataclass(frozen=True)
class Coefficients:
    """What one forward pass costs. Bytes are read from device memory at bandwidth_bytes_per_s;
    FLOPs run at flops_per_s; step_overhead_s is paid once per iteration (launch, sampling,
    scheduling). swap_bandwidth_bytes_per_s prices moving KV to and from host memory."""

    weights_bytes: int
    kv_bytes_per_token: int
    flops_per_token: int
    bandwidth_bytes_per_s: float
    flops_per_s: float
    step_overhead_s: float = 0.0
    swap_bandwidth_bytes_per_s: float = 25e9
    source: str = "roofline"

    def __post_init__(self) -> None:
        for name in ("bandwidth_bytes_per_s", "flops_per_s", "swap_bandwidth_bytes_per_s"):
            if not getattr(self, name) > 0:
                raise SpecError(name, getattr(self, name), "must be > 0")
        for name in ("weights_bytes", "kv_bytes_per_token", "flops_per_token", "step_overhead_s"):
            if getattr(self, name) < 0:
                raise SpecError(name, getattr(self, name), "must be >= 0")


def coefficients(weights_bytes: int, kv_bytes_per_token: int, active_parameters: int,
                 bandwidth_bytes_per_s: float, flops_per_s: float,
                 step_overhead_s: float = 0.0) -> Coefficients:
    """FLOPs per token = 2 x active parameters (one multiply-add per weight; attention's
    context-dependent FLOPs are left out, a few percent at chat lengths). Every weight is read
    each iteration: right for dense models and for MoE once a batch touches every expert,
    pessimistic for a single MoE stream."""
    return Coefficients(weights_bytes, kv_bytes_per_token, 2 * active_parameters,
                        bandwidth_bytes_per_s, flops_per_s, step_overhead_s)


def coefficients_for_plan(plan: Plan, bandwidth_bytes_per_s: float, flops_per_s: float,
                          step_overhead_s: float = 0.0) -> Coefficients:
    """The ledger's weights (+ quantization metadata) and KV bytes per token, the model's
    active parameters, and the device's bandwidth and FLOPS."""
    weights = plan.line("weights") + plan.line("weight_metadata")
    return coefficients(weights, plan.kv_bytes_per_token, plan.active_parameters,
                        bandwidth_bytes_per_s, flops_per_s, step_overhead_s)


def iteration_s(coef: Coefficients, num_tokens: int, kv_tokens_read: int) -> float:
    """t = max(FLOPs / flops_per_s, bytes / bandwidth) + step overhead, where
    FLOPs = flops_per_token x tokens computed this iteration and
    bytes = weights (read once per iteration) + kv_bytes_per_token x (live tokens read + tokens
    written). Seconds."""
    compute = coef.flops_per_token * num_tokens / coef.flops_per_s
    memory = (coef.weights_bytes + coef.kv_bytes_per_token * (kv_tokens_read + num_tokens)) \
        / coef.bandwidth_bytes_per_s
    return (compute if compute > memory else memory) + coef.step_overhead_s


def decode_bound_tokens_per_s(coef: Coefficients) -> float:
    """One stream's ceiling: bandwidth / weights bytes (seed 004: 14 GB at 2,000 GB/s -> ~143
    tokens/s; 8-bit weights -> ~286). Ignores KV reads and overhead, as the seed does."""
    return coef.bandwidth_bytes_per_s / coef.weights_bytes


def swap_s(coef: Coefficients, num_tokens: int) -> float:
    """Moving num_tokens of KV across the host link, seconds."""
    return coef.kv_bytes_per_token * num_tokens / coef.swap_bandwidth_bytes_per_s


def override(coef: Coefficients, values: dict, source: str) -> Coefficients:
    """Replace coefficients by name (a measured coefficients file); unknown names are errors."""
    names = {f.name for f in fields(Coefficients)} - {"source"}
    for key, value in values.items():
        if key not in names:
            raise SpecError(key, value, "unknown coefficient; allowed: " + ", ".join(sorted(names)))
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise SpecError(key, value, "a finite number")
    ints = {"weights_bytes", "kv_bytes_per_token", "flops_per_token"}
    clean = {k: int(v) if k in ints else float(v) for k, v in values.items()}
    return replace(coef, **clean, source=source)


def as_dict(coef: Coefficients) -> dict:
    return asdict(coef)
