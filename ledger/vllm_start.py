"""'Does not start', and vLLM's own advice when it would not: the largest max_model_len its pool
holds, or the gpu_memory_utilization that would be needed, each found with fit's search; when
what runs after the pool does not fit, the largest gpu_memory_utilization or max_num_seqs that
leaves it room, or --enforce-eager."""

import math
from collections.abc import Callable
from dataclasses import dataclass

from .ranks import Deployment
from .units import GiB

UTIL_STEP = 100  # gpu_memory_utilization is searched in hundredths, as users type it


@dataclass(frozen=True)
class StartAdvice:
    """What would make the engine start: a max_model_len, a gpu_memory_utilization, a
    max_num_seqs (each None when nothing in range does, or it would not help), and the sentence
    vLLM's own error gives."""

    max_model_len: int | None
    gpu_memory_utilization: float | None
    text: str
    max_num_seqs: int | None = None


def starts(deployment: Deployment) -> bool:
    return all(stage.plan.starts for stage in deployment.stages)


def fails_after_pool(deployment: Deployment) -> bool:
    """Every pool holds a request, but on some rank what runs after it does not fit."""
    plans = [stage.plan for stage in deployment.stages]
    return all(p.after_pool is not None for p in plans) and not starts(deployment)


def advise_after_pool(at_utilization: Callable[[float], Deployment],
                      at_seqs: Callable[[int], Deployment], utilization: float,
                      max_num_seqs: int, deployment: Deployment) -> StartAdvice:
    """vLLM's 'Please try lowering max_num_seqs or gpu_memory_utilization' (its sampler
    warm-up error) and --enforce-eager for the capture, with the figures: the largest
    gpu_memory_utilization below the asked one, and the largest max_num_seqs below it, that
    start."""
    from .fit import largest  # a deployment that does not start alone

    hundredths = round(utilization * UTIL_STEP)
    # hundredths below the asked utilization that still fail: the first past them starts (far
    # lower, the pool would stop holding a request: the gallop lands well inside the gap)
    by_util = largest("gpu_memory_utilization", lambda j: _gate(
        at_utilization((hundredths - j) / UTIL_STEP), fails=True), 0, max(hundredths - 1, 0))
    below = by_util.beyond.value if by_util.beyond else None
    util = (hundredths - below) / UTIL_STEP if below is not None and _starts_at(
        at_utilization, (hundredths - below) / UTIL_STEP) else None
    by_seqs = largest("max_num_seqs", lambda n: _gate(at_seqs(n)), 1, max(max_num_seqs - 1, 1))
    seqs = by_seqs.answer.value if by_seqs.answer else None
    after = next(s.plan.after_pool for s in deployment.stages if not s.plan.starts)
    parts = [f"lower gpu_memory_utilization to {util:.2f}"] if util is not None else []
    parts += [f"lower max_num_seqs to {seqs:,}"] if seqs is not None else []
    if after.graphs_bytes:
        parts.append("start vLLM with --enforce-eager (no CUDA graphs)")
    text = (f"vLLM would fail after sizing its KV pool: {after.sentence()}; "
            + " or ".join(parts))
    return StartAdvice(None, util, text, seqs)


def advise(at_length: Callable[[int], Deployment], at_utilization: Callable[[float], Deployment],
           max_model_len: int, utilization: float) -> StartAdvice:
    """vLLM's 'Try increasing gpu_memory_utilization or decreasing max_model_len', with the
    figures: the largest max_model_len below the asked one that starts, and the smallest
    gpu_memory_utilization up to 1.00 that starts at the asked max_model_len."""
    from .fit import largest  # a deployment that does not start alone

    by_length = largest("max_model_len", lambda n: _gate(at_length(n)), 1,
                        max(max_model_len - 1, 1))
    length = by_length.answer.value if by_length.answer else None
    hundredths = round(utilization * UTIL_STEP)
    by_util = largest("gpu_memory_utilization",
                      lambda k: _gate(at_utilization((UTIL_STEP - k) / UTIL_STEP)), 0,
                      max(UTIL_STEP - hundredths - 1, 0))
    util = (UTIL_STEP - by_util.answer.value) / UTIL_STEP if by_util.answer else None
    parts = []
    if length is not None:
        parts.append(f"decrease max_model_len to {length:,} (the largest that fits)")
    if util is not None and util > utilization:
        parts.append(f"increase gpu_memory_utilization to {util:.2f}")
    text = ("vLLM would refuse to start: " + (" or ".join(parts) if parts else
            "no max_model_len >= 1 and no gpu_memory_utilization up to 1.00 starts it"))
    return StartAdvice(length, util if util is not None and util > utilization else None, text)


class _Gate:
    """A deployment whose `fits` is whether the engine starts (what the search reads), or with
    `fails`, whether it does not."""

    def __init__(self, deployment: Deployment, fails: bool = False) -> None:
        self.deployment = deployment
        self.fits = starts(deployment) != fails
        self.plan = deployment.plan


def _gate(deployment: Deployment, fails: bool = False) -> "_Gate":
    return _Gate(deployment, fails)


def _starts_at(at_utilization: Callable[[float], Deployment], utilization: float) -> bool:
    return utilization > 0 and starts(at_utilization(utilization))


FREE_CHECK_FROM = (0, 9, 2)  # V1 gpu_worker.init_device (utils.request_memory from 0.14)
ROUNDING = 0.005 * GiB  # vLLM prints the free memory rounded to 0.01 GiB


def checks_free(row) -> bool:
    """The release refuses to start when less than its request is free (V1, from 0.9.2)."""
    return row.formula == "v1" and row.version >= FREE_CHECK_FROM


def requested_bytes(device_bytes: int, utilization: float) -> int:
    """What vLLM asks of the device: ceil(total x gpu_memory_utilization), the TOTAL memory,
    whatever other processes hold (vllm/v1/worker/utils.py request_memory at v0.33.0)."""
    return math.ceil(device_bytes * utilization)


def free_memory_refusal(row, device_bytes: int, utilization: float,
                        free_bytes: int | None) -> str | None:
    """vLLM (V1, from 0.9.2) refuses to start when the memory free at startup is below
    ceil(total x gpu_memory_utilization) (vllm/v1/worker/utils.py request_memory at v0.19.0;
    gpu_worker.py init_device at v0.9.2): memory other processes hold is no line of the plan,
    so the log's free figure is taken as measured. None: it starts as far as this check goes."""
    if free_bytes is None or not checks_free(row):
        return None
    requested = requested_bytes(device_bytes, utilization)
    if free_bytes + ROUNDING >= requested:
        return None
    return (f"the device had {free_bytes / GiB:.2f} GiB free at startup (the log's), below "
            f"gpu_memory_utilization {utilization:.2f} x {device_bytes / GiB:.2f} GiB = "
            f"{requested / GiB:.2f} GiB: vLLM refuses to start (other processes hold "
            f"{(device_bytes - free_bytes) / GiB:.2f} GiB)")
