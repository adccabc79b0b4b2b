"""A load in `vllm bench serve`'s words: --rate, --num-requests and a fixed-shape workload
(--input-len, --output-len) without a YAML."""

import math
from dataclasses import replace

from servecap.ledger.errors import SpecError

from .workload import (
    MAX_NUM_REQUESTS,
    MAX_RATE_PER_S,
    MIN_RATE_PER_S,
    Arrivals,
    Lengths,
    Workload,
)

DEFAULT_NUM_REQUESTS = 1000  # vllm bench serve --num-prompts


def fixed_shape(input_len: int, output_len: int, num_requests: int | None,
                rate_per_s: float | None) -> Workload:
    """num_requests (default 1,000) requests of input_len prompt and output_len output tokens;
    Poisson at rate_per_s, or all at once without a rate (vllm bench serve's default
    --request-rate inf)."""
    for name, value in (("--input-len", input_len), ("--output-len", output_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(name, value, "a whole number of tokens >= 1")
    count = DEFAULT_NUM_REQUESTS if num_requests is None else num_requests
    arrivals = Arrivals("bursts", burst_size=count, interval_s=1.0) if rate_per_s is None \
        else Arrivals("poisson", rate_per_s=rate_per_s)
    work = Workload(arrivals, Lengths("fixed", value=input_len),
                    Lengths("fixed", value=output_len), count, name=f"fixed {input_len}/"
                    f"{output_len} tokens")
    return with_load(work, rate_per_s, num_requests)


def with_load(workload: Workload, rate_per_s: float | None,
              num_requests: int | None) -> Workload:
    """The workload at another rate (Poisson; gamma keeps its CV) and request count."""
    if num_requests is not None:
        if isinstance(num_requests, bool) or not isinstance(num_requests, int) \
                or not 1 <= num_requests <= MAX_NUM_REQUESTS:
            raise SpecError("--num-requests", num_requests,
                            f"a whole number in 1..{MAX_NUM_REQUESTS:,}")
        if workload.arrivals.kind == "fixed":
            raise SpecError("--num-requests", num_requests, "the workload's arrivals are "
                            "fixed times: its count is theirs")
        workload = replace(workload, num_requests=num_requests)
    if rate_per_s is None:
        return workload
    check_rate(rate_per_s)
    gamma = workload.arrivals.kind == "gamma"
    arrivals = Arrivals("gamma" if gamma else "poisson", rate_per_s,
                        workload.arrivals.cv if gamma else 1.0)
    return replace(workload, arrivals=arrivals)


def check_rate(rate_per_s: float, field: str = "--rate") -> float:
    if not (isinstance(rate_per_s, int | float) and math.isfinite(rate_per_s)
            and MIN_RATE_PER_S <= rate_per_s <= MAX_RATE_PER_S):
        raise SpecError(field, rate_per_s, f"requests per second in [{MIN_RATE_PER_S:g}, "
                        f"{MAX_RATE_PER_S:g}]")
    return float(rate_per_s)
