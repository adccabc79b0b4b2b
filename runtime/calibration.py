"""Step-time samples from the declared load and the coefficients fitted to them.

Each step becomes a StepSample (the contract the simulator's step-model fit reads):
duration_s, num_prefill_tokens, num_decode_tokens, prefill_attention_tokens (sum over the
step's prefill tokens of the keys each attends to), decode_context_tokens (sum over decode
sequences of their context length) and num_seqs.

Two fits. The simulator's roofline terms (--coefficients): t = max(F_tok x n / flops_per_s,
(W + kv x (r + n)) / bandwidth_bytes_per_s) + step_overhead_s, the memory side first from
decode-only steps (least squares of t = o + bytes / B), flops_per_s the median of
FLOPs / (t - o) over steps with prefill, then all three refined together over every step.
And a linear step model, least squares over every step:
t = c0 + c_p x prefill tokens + c_a x prefill attention tokens + c_d x decode tokens
    + c_c x decode context tokens,
whose residuals (p50 / p95 of |measured - fitted| / measured, per step kind) say how well a
step's time is explained by its work, attention growing with context included.
"""

import statistics
from dataclasses import asdict, dataclass

import torch

from servecap.sim.metrics import quantiles

from .latency import step_ms

TERMS = ("num_prefill_tokens", "prefill_attention_tokens", "num_decode_tokens",
         "decode_context_tokens")


@dataclass(frozen=True)
class StepSample:
    duration_s: float
    num_prefill_tokens: int
    num_decode_tokens: int
    prefill_attention_tokens: int
    decode_context_tokens: int
    num_seqs: int

    @property
    def kind(self) -> str:
        if not self.num_prefill_tokens:
            return "decode"
        return "mixed" if self.num_decode_tokens else "prefill"

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens

    @property
    def kv_tokens_read(self) -> int:
        """K/V tokens attention read before this step's own writes (decode: the context less
        the one token written; prefill: counted in prefill_attention_tokens)."""
        return max(0, self.decode_context_tokens - self.num_decode_tokens)

    def as_dict(self) -> dict:
        return asdict(self)


class StepClock:
    """An engine step hook keeping one StepSample per step that computed anything."""

    def __init__(self) -> None:
        self.samples: list[StepSample] = []

    def __call__(self, stats) -> None:
        if stats.num_batched_tokens:
            self.samples.append(StepSample(
                stats.step_s, stats.num_batched_tokens - stats.num_decode_tokens,
                stats.num_decode_tokens, stats.prefill_attention_tokens,
                stats.decode_context_tokens, stats.num_seqs))


def fit_coefficients(samples: list[StepSample], weights_bytes: int, kv_bytes_per_token: int,
                     flops_per_token: int) -> dict:
    """{'coefficients': names the simulator accepts, 'fit': the roofline replay and the linear
    step model with residuals, 'steps': every sample}."""
    def moved(s: StepSample) -> int:
        return weights_bytes + kv_bytes_per_token * (s.kv_tokens_read + s.num_tokens)

    decode = [s for s in samples if s.kind == "decode"]
    overhead_s, bandwidth = _memory_side([moved(s) for s in decode],
                                         [s.duration_s for s in decode])
    coef = {"weights_bytes": weights_bytes, "kv_bytes_per_token": kv_bytes_per_token,
            "flops_per_token": flops_per_token, "step_overhead_s": overhead_s}
    if bandwidth:
        coef["bandwidth_bytes_per_s"] = bandwidth
    rates = [flops_per_token * s.num_tokens / (s.duration_s - overhead_s)
             for s in samples if s.kind != "decode" and s.duration_s > overhead_s]
    if rates:
        coef["flops_per_s"] = statistics.median(rates)
        coef.update(_refine(samples, coef, moved))
    fit = _fit_quality(samples, coef, moved)
    fit["step_model"] = step_model(samples)
    return {"coefficients": coef, "fit": fit, "steps": [s.as_dict() for s in samples]}


def _memory_side(moved_bytes: list[int], seconds: list[float]) -> tuple[float, float | None]:
    """(overhead s, bandwidth B/s) from t = o + bytes / B over decode steps."""
    if not seconds:
        return 0.0, None
    if len(set(moved_bytes)) > 1:
        slope, intercept = statistics.linear_regression(moved_bytes, seconds)
        if slope > 0 and intercept >= 0:
            return intercept, 1 / slope
    return 0.0, statistics.median(b / s for b, s in zip(moved_bytes, seconds, strict=True))


def _replay(coef: dict, num_tokens: int, moved_bytes: int) -> float:
    """The simulator's step time: max(compute, memory) + overhead."""
    return max(coef["flops_per_token"] * num_tokens / coef["flops_per_s"],
               moved_bytes / coef["bandwidth_bytes_per_s"]) + coef["step_overhead_s"]


def _refine(samples: list[StepSample], coef: dict, moved) -> dict:
    """The three rates scaled together over every step (decode, prefill and mixed): the first
    estimates each see one kind of step only, yet the simulator replays all of them with the
    same max(compute, memory) + overhead. A grid of factors 1/2..2 on bandwidth and FLOP rate
    and 0..2 on the overhead, minimising the mean |replayed - measured| in seconds (latency is
    a sum of step times, so a long step's error counts for more than a short one's)."""
    work = [(s.num_tokens, moved(s), s.duration_s) for s in samples if s.duration_s > 0]
    factors = [2 ** (k / 10) for k in range(-10, 11)]
    base = {k: coef[k] for k in ("bandwidth_bytes_per_s", "flops_per_s", "step_overhead_s")}
    best, best_err = base, _error(coef, work)
    for o in (base["step_overhead_s"] * k / 10 for k in range(21)):
        for fb in factors:
            for ff in factors:
                trial = {**coef, "bandwidth_bytes_per_s": base["bandwidth_bytes_per_s"] * fb,
                         "flops_per_s": base["flops_per_s"] * ff, "step_overhead_s": o}
                err = _error(trial, work)
                if err < best_err:
                    best, best_err = {k: trial[k] for k in base}, err
    return best


def _error(coef: dict, work: list[tuple[int, int, float]]) -> float:
    return sum(abs(_replay(coef, n, b) - t) for n, b, t in work) / max(1, len(work))


def _fit_quality(samples: list[StepSample], coef: dict, moved) -> dict:
    """Measured vs replayed step times (p50/p95, ms) with the fitted roofline coefficients."""
    if "bandwidth_bytes_per_s" not in coef or "flops_per_s" not in coef:
        return {"num_steps": len(samples), "note": "needs both decode-only and prefill steps"}
    replayed = [_replay(coef, s.num_tokens, moved(s)) for s in samples]
    return {"num_steps": len(samples),
            "measured_step_ms": step_ms([s.duration_s for s in samples]),
            "replayed_step_ms": step_ms(replayed)}


def step_model(samples: list[StepSample]) -> dict:
    """Least squares t = c0 + sum c_i x term_i over every step (terms that never vary are
    dropped); residuals as shares of the measured time, per step kind."""
    if len(samples) < 2:
        return {"num_steps": len(samples), "note": "needs at least two steps"}
    terms = [t for t in TERMS if len({getattr(s, t) for s in samples}) > 1]
    x = torch.tensor([[1.0, *(float(getattr(s, t)) for t in terms)] for s in samples],
                     dtype=torch.float64)
    y = torch.tensor([s.duration_s for s in samples], dtype=torch.float64)
    solution = torch.linalg.lstsq(x, y.unsqueeze(1)).solution.squeeze(1)
    fitted = (x @ solution).tolist()
    out = {"num_steps": len(samples), "intercept_s": solution[0].item(),
           "seconds_per": dict(zip(terms, solution[1:].tolist(), strict=True)),
           "residuals": {}}
    for kind in ("prefill", "decode", "mixed", "all"):
        rel = [abs(s.duration_s - f) / s.duration_s for s, f in zip(samples, fitted, strict=True)
               if (kind == "all" or s.kind == kind) and s.duration_s > 0]
        if rel:
            out["residuals"][kind] = _residuals(rel)
    return out


def _residuals(rel: list[float]) -> dict:
    """p50 / p95 of |measured - fitted| / measured, and their spread (p95 - p50), percent."""
    stats = quantiles(rel)
    p50, p95 = stats["p50"], stats["p95"]
    return {"num_steps": len(rel), "p50_pct": 100 * p50, "p95_pct": 100 * p95,
            "spread_pct": 100 * (p95 - p50)}
