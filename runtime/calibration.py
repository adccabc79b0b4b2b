"""Iteration-time coefficients fitted to the run's own steps, in the simulator's roofline terms.

The simulator prices a step as t = max(F_tok x n / flops_per_s, (W + kv x (r + n)) /
bandwidth_bytes_per_s) + step_overhead_s (n tokens computed, r KV tokens read). Here:
decode-only steps fit the memory side, t = o + bytes / B (least squares; o = 0 and the median
of bytes / t when that fit is degenerate); steps with prefill give flops_per_s as the median
of FLOPs / (t - o). The file holds only coefficient names the simulator's --coefficients takes.
"""

import statistics
from dataclasses import dataclass

from .latency import percentile


@dataclass(frozen=True)
class StepTiming:
    duration_s: float
    num_tokens: int
    kv_tokens_read: int
    decode_only: bool


class StepClock:
    """An engine step hook: each step's own duration, tokens computed, and the K/V tokens its
    attention read (the engine's num_context_tokens less the tokens it wrote)."""

    def __init__(self) -> None:
        self.timings: list[StepTiming] = []

    def __call__(self, stats) -> None:
        if stats.num_batched_tokens:
            self.timings.append(StepTiming(
                stats.step_s, stats.num_batched_tokens,
                stats.num_context_tokens - stats.num_batched_tokens,
                stats.num_decode_tokens == stats.num_batched_tokens))


def fit_coefficients(timings: list[StepTiming], weights_bytes: int, kv_bytes_per_token: int,
                     flops_per_token: int) -> dict:
    """{'coefficients': names the simulator accepts, 'fit': how well they replay the steps}."""
    def moved(t: StepTiming) -> int:
        return weights_bytes + kv_bytes_per_token * (t.kv_tokens_read + t.num_tokens)

    decode = [t for t in timings if t.decode_only]
    overhead_s, bandwidth = _memory_side([moved(t) for t in decode],
                                         [t.duration_s for t in decode])
    coef = {"weights_bytes": weights_bytes, "kv_bytes_per_token": kv_bytes_per_token,
            "flops_per_token": flops_per_token, "step_overhead_s": overhead_s}
    if bandwidth:
        coef["bandwidth_bytes_per_s"] = bandwidth
    rates = [flops_per_token * t.num_tokens / (t.duration_s - overhead_s)
             for t in timings if not t.decode_only and t.duration_s > overhead_s]
    if rates:
        coef["flops_per_s"] = statistics.median(rates)
    return {"coefficients": coef, "fit": _fit_quality(timings, coef, moved)}


def _memory_side(moved_bytes: list[int], seconds: list[float]) -> tuple[float, float | None]:
    """(overhead s, bandwidth B/s) from t = o + bytes / B over decode steps."""
    if not seconds:
        return 0.0, None
    if len(set(moved_bytes)) > 1:
        slope, intercept = statistics.linear_regression(moved_bytes, seconds)
        if slope > 0 and intercept >= 0:
            return intercept, 1 / slope
    return 0.0, statistics.median(b / s for b, s in zip(moved_bytes, seconds, strict=True))


def _fit_quality(timings: list[StepTiming], coef: dict, moved) -> dict:
    """Measured vs replayed step times (p50/p95, ms) with the fitted coefficients."""
    if "bandwidth_bytes_per_s" not in coef or "flops_per_s" not in coef:
        return {"num_steps": len(timings), "note": "needs both decode-only and prefill steps"}
    replayed = [max(coef["flops_per_token"] * t.num_tokens / coef["flops_per_s"],
                    moved(t) / coef["bandwidth_bytes_per_s"]) + coef["step_overhead_s"]
                for t in timings]
    measured = [t.duration_s for t in timings]
    return {"num_steps": len(timings),
            "measured_step_ms": {p: percentile(measured, q) * 1e3
                                 for p, q in (("p50", 50), ("p95", 95))},
            "replayed_step_ms": {p: percentile(replayed, q) * 1e3
                                 for p, q in (("p50", 50), ("p95", 95))}}
