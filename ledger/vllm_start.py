"""'Does not start', and vLLM's own advice when it would not: the largest max_model_len its pool
holds, or the gpu_memory_utilization that would be needed, each found with fit's search."""

from collections.abc import Callable
from dataclasses import dataclass

from .fit import largest
from .ranks import Deployment

UTIL_STEP = 100  # gpu_memory_utilization is searched in hundredths, as users type it


@dataclass(frozen=True)
class StartAdvice:
    """What would make the engine start: a max_model_len, a gpu_memory_utilization (either may
    be None when nothing in range does), and the sentence vLLM's own error gives."""

    max_model_len: int | None
    gpu_memory_utilization: float | None
    text: str


def starts(deployment: Deployment) -> bool:
    return all(stage.plan.starts for stage in deployment.stages)


def advise(at_length: Callable[[int], Deployment], at_utilization: Callable[[float], Deployment],
           max_model_len: int, utilization: float) -> StartAdvice:
    """vLLM's 'Try increasing gpu_memory_utilization or decreasing max_model_len', with the
    figures: the largest max_model_len below the asked one that starts, and the smallest
    gpu_memory_utilization up to 1.00 that starts at the asked max_model_len."""
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
    """A deployment whose `fits` is whether the engine starts (what the search reads)."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.fits = starts(deployment)
        self.plan = deployment.plan


def _gate(deployment: Deployment) -> "_Gate":
    return _Gate(deployment)
