"""Fit the step model to measured steps: effective rates, fixed overhead, residual spread, and
how sure each one is.

t = overhead + max(gemm_s x g + attention_s x a, memory_s x m), with gemm_s, attention_s and
memory_s the speed-of-light terms of each step (step_model.terms at the constants' peaks).
Each step is classed compute- or memory-bound by the current fit, the linear system is solved
by least squares weighted by each step's own time (relative errors: a step's noise is a share
of it), and the classes are revisited until they hold. Then:

- Outliers: a step slower than the fit by more than OUTLIER_Z modified z-scores (0.6745 x
  (residual - median) / MAD of the residuals relative to each predicted step, Iglewicz &
  Hoaglin 1993, "How to Detect and Handle Outliers")
  is a stall (scheduler, garbage collector), not the model's: it is dropped and the fit
  repeated once. Faster-than-model steps are kept (nothing makes a step faster by accident).
- Intervals: each factor's 95 % interval from the weighted least-squares covariance,
  sigma^2 (X'WX)^-1 with sigma^2 the weighted RSS / (n - p) and Student's t at n - p degrees
  of freedom; a rate's interval is the peak over its factor's.
- Underdetermined: a rate whose steps cannot pin it (no step is bound by it, it moves with
  another term, it comes out <= 0, or its interval is wider than the value) is named, never
  held silently at the peak the fit started from. A memory term no step is bound by is set to
  the slowest bandwidth under which still none would be (a lower bound on the bandwidth, so
  the simulator prices those steps as they were measured); an attention term that moves with
  the GEMMs is priced at the GEMM rate; any other (a GEMM term no step follows) is left at
  the peak the fit started from, and its reason says so ('left at the 100 GFLOP/s the fit
  starts from'): the file's residuals were taken with it there. An overhead
  fitted below 0 is held at 0 and the rates refitted without it (named too), never clipped
  after a fit that leaned on it.
"""

import math

from servecap.ledger.errors import SpecError

from .intervals import t_quantile

SAMPLE_KEYS = ("duration_s", "num_prefill_tokens", "num_decode_tokens",
               "prefill_attention_tokens", "decode_context_tokens", "num_seqs")
CONSTANT_KEYS = ("weights_bytes", "kv_bytes_per_token", "flops_per_token",
                 "bandwidth_bytes_per_s", "flops_per_s")
ROUNDS = 8  # compute/memory-bound classification converges in a few rounds
OUTLIER_Z = 3.5  # Iglewicz & Hoaglin's cut on the modified z-score
TERMS = ("o", "g", "a", "m")  # overhead, GEMM, attention and memory factors
RATES = {"g": "flops_per_s", "a": "attention_flops_per_s", "m": "bandwidth_bytes_per_s"}


def fit_step_model(samples: list[dict], constants: dict) -> dict:
    """Returns {"coefficients": {...}, "intervals", "underdetermined", "residual_cv",
    "rms_residual_s", "num_samples", "num_outliers", "num_compute_bound"}: coefficients in
    the names --coefficients accepts (rates are the achieved ones: peak / factor) with
    step_time_cv the residuals' spread relative to each step's predicted time; intervals
    {name: [low, high]} of the fitted ones; underdetermined {name: why}."""
    rows = [_terms(_check(s, i), constants) for i, s in enumerate(samples)]
    if len(rows) < 3:
        raise SpecError("samples", len(rows), "at least 3 measured steps to fit")
    fit = _fit(rows)
    kept = _without_outliers(rows, fit)
    if len(kept) < len(rows) and len(kept) >= 3:
        fit = _fit(kept)
    return _report(kept, fit, constants) | {"num_samples": len(rows),
                                            "num_outliers": len(rows) - len(kept)}


def _check(sample: dict, index: int) -> dict:
    for key in SAMPLE_KEYS:
        value = sample.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0:
            raise SpecError(f"samples[{index}].{key}", value, "a finite number >= 0")
    return sample


def _terms(sample: dict, c: dict) -> tuple[float, float, float, float]:
    """(measured s, gemm_s, attention_s, memory_s) at peak rates."""
    tokens = sample["num_prefill_tokens"] + sample["num_decode_tokens"]
    flops = c["flops_per_s"]
    gemm = c["flops_per_token"] * tokens / flops
    attention = c.get("attention_flops_per_token_pair", 0) * (
        sample["prefill_attention_tokens"] + sample["decode_context_tokens"]) \
        / (c.get("attention_flops_per_s") or flops)
    memory = (c["weights_bytes"] + c["kv_bytes_per_token"] * (
        sample["decode_context_tokens"] + tokens)) / c["bandwidth_bytes_per_s"]
    return sample["duration_s"], gemm, attention, memory


class _Fit:
    """Factors, their standard errors, and why a term could not be fitted."""

    def __init__(self) -> None:
        self.factors = {"o": 0.0, "g": 1.0, "a": 1.0, "m": 1.0}
        self.errors: dict[str, float] = {}
        self.dof = 0
        self.why: dict[str, str] = {}

    def predict(self, row) -> float:
        f = self.factors
        _, g, a, m = row
        return f["o"] + max(g * f["g"] + a * f["a"], m * f["m"])


def _fit(rows) -> _Fit:
    fit = _Fit()
    for _ in range(ROUNDS):
        bound = [_compute_bound(r, fit.factors) for r in rows]
        new = _solve(rows, bound)
        if new.factors == fit.factors:
            break
        fit = new
    return fit


def _compute_bound(row, f) -> bool:
    _, gemm, attention, memory = row
    return gemm * f["g"] + attention * f["a"] > memory * f["m"]


def _solve(rows, bound) -> _Fit:
    """Least squares on [1, gemm, attention, 0] (compute-bound) or [1, 0, 0, memory] rows,
    each divided by its measured time (a step's noise is a share of it, so the fit and its
    intervals weigh every step's relative error alike).
    A column without support, one that moves with another, or a factor fitted <= 0 (an
    overhead < 0) is dropped (named in `why`) and the rest refitted."""
    fit, cols = _Fit(), [0, 1, 2, 3]
    design = [(1.0, g if b else 0.0, a if b else 0.0, 0.0 if b else m)
              for (_, g, a, m), b in zip(rows, bound, strict=True)]
    # each row in units of its own measured step: relative errors, as the noise is
    weights = [1 / r[0] if r[0] > 0 else 1.0 for r in rows]
    design = [tuple(v * w for v in row) for row, w in zip(design, weights, strict=True)]
    target = [r[0] * w for r, w in zip(rows, weights, strict=True)]
    for j, name in ((1, "g"), (2, "a"), (3, "m")):
        if not any(row[j] for row in design):
            cols.remove(j)
            fit.why[RATES[name]] = "no step exercised it (no compute-bound step, or no " \
                "attention)" if j < 3 else "no step was bound by memory traffic"
    while True:
        beta, cov, dof = _least_squares([[row[j] for j in cols] for row in design], target)
        bad = _first_bad(cols, beta)
        if bad is None:
            break
        fit.why[RATES.get(TERMS[bad[0]], "step_overhead_s")] = bad[1]
        cols.remove(bad[0])
    for i, j in enumerate(cols):
        fit.factors[TERMS[j]] = beta[i]
        fit.errors[TERMS[j]] = math.sqrt(max(cov[i][i], 0.0)) if cov else math.inf
    fit.factors["o"] = max(fit.factors["o"], 0.0)
    fit.dof = dof
    return fit


def _first_bad(cols: list[int], beta: list[float | None]) -> tuple[int, str] | None:
    for i, j in enumerate(cols):
        if not j:  # the overhead: one below 0 is held at 0 and the rates refitted without it
            if beta[i] is not None and beta[i] < 0:
                return j, f"fitted at {beta[i]:.3g} s (< 0): held at 0, the rates refitted"
            continue
        if beta[i] is None:
            return j, "moves with another term in these steps (collinear)"
        if beta[i] <= 0:
            return j, f"fitted at {beta[i]:.3g} x the time at peak (<= 0: the steps do not "\
                "follow this term)"
    return None


def _least_squares(x: list[list[float]], y: list[float]
                   ) -> tuple[list[float | None], list[list[float]] | None, int]:
    """(beta, covariance of beta, degrees of freedom): normal equations on columns scaled to
    unit RMS, Gauss-Jordan with partial pivoting; None for a column that is (near) a
    combination of the others."""
    n, p = len(x), len(x[0])
    scale = [math.sqrt(sum(r[j] * r[j] for r in x) / n) or 1.0 for j in range(p)]
    xs = [[r[j] / scale[j] for j in range(p)] for r in x]
    a = [[sum(r[i] * r[j] for r in xs) for j in range(p)] + [sum(r[i] * t for r, t in
                                                               zip(xs, y, strict=True))]
         + [1.0 if k == i else 0.0 for k in range(p)] for i in range(p)]
    for col in range(p):
        pivot = max(range(col, p), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-9 * n:
            return [None if i == col else 0.0 for i in range(p)], None, 0
        a[col], a[pivot] = a[pivot], a[col]
        lead = a[col][col]
        a[col] = [v / lead for v in a[col]]
        for r in range(p):
            if r != col:
                k = a[r][col]
                a[r] = [v - k * q for v, q in zip(a[r], a[col], strict=True)]
    beta = [a[i][p] / scale[i] for i in range(p)]
    dof = n - p
    rss = sum((t - sum(b * v for b, v in zip(beta, r, strict=True))) ** 2
              for r, t in zip(x, y, strict=True))
    sigma2 = rss / dof if dof > 0 else math.inf
    cov = [[sigma2 * a[i][p + 1 + j] / (scale[i] * scale[j]) for j in range(p)]
           for i in range(p)]
    return beta, cov, dof


def _without_outliers(rows, fit: _Fit) -> list:
    """The steps not slower than the fit by more than OUTLIER_Z modified z-scores of the
    residual relative to the predicted step (a step's noise grows with its length)."""
    residuals = [(r[0] - p) / p if (p := fit.predict(r)) > 0 else 0.0 for r in rows]
    ordered = sorted(residuals)
    median = ordered[len(ordered) // 2]
    mad = sorted(abs(r - median) for r in residuals)[len(residuals) // 2]
    if mad <= 0:
        return rows
    return [row for row, r in zip(rows, residuals, strict=True)
            if 0.6745 * (r - median) / mad <= OUTLIER_Z]


def _report(rows, fit: _Fit, c: dict) -> dict:
    f, why = dict(fit.factors), dict(fit.why)
    intervals = _intervals(fit, c)
    for name, term in (("g", "flops_per_s"), ("a", "attention_flops_per_s"),
                       ("m", "bandwidth_bytes_per_s")):
        err = fit.errors.get(name)
        if term not in why and err is not None and t_quantile(max(fit.dof, 1)) * err \
                >= f[name]:
            why[term] = "its 95 % interval is wider than its value"
    _stand_in(rows, f, why, set(fit.errors), c)
    predicted = [f["o"] + max(g * f["g"] + a * f["a"], m * f["m"]) for _, g, a, m in rows]
    residuals = [t - p for (t, _, _, _), p in zip(rows, predicted, strict=True)]
    relative = [r / p for r, p in zip(residuals, predicted, strict=True) if p > 0]
    cv = math.sqrt(sum(r * r for r in relative) / len(relative)) if relative else 0.0
    flops = c["flops_per_s"]
    coefficients = {
        "weights_bytes": c["weights_bytes"], "kv_bytes_per_token": c["kv_bytes_per_token"],
        "flops_per_token": c["flops_per_token"],
        "bandwidth_bytes_per_s": c["bandwidth_bytes_per_s"] / f["m"],
        "flops_per_s": flops / f["g"],
        "attention_flops_per_token_pair": c.get("attention_flops_per_token_pair", 0),
        "attention_flops_per_s": (c.get("attention_flops_per_s") or flops) / f["a"],
        "step_overhead_s": f["o"], "step_time_cv": cv}
    return {"coefficients": coefficients, "residual_cv": cv,
            "rms_residual_s": math.sqrt(sum(r * r for r in residuals) / len(residuals)),
            "intervals": {k: v for k, v in intervals.items() if k not in why},
            "underdetermined": why,
            "num_compute_bound": sum(_compute_bound(r, f) for r in rows)}


def _intervals(fit: _Fit, c: dict) -> dict:
    """Each fitted term's 95 % interval: the overhead in seconds, rates as peak / factor."""
    t = t_quantile(max(fit.dof, 1))
    peaks = {"g": c["flops_per_s"], "m": c["bandwidth_bytes_per_s"],
             "a": c.get("attention_flops_per_s") or c["flops_per_s"]}
    out = {}
    for name, err in fit.errors.items():
        value = fit.factors[name]
        low, high = value - t * err, value + t * err
        if name == "o":
            out["step_overhead_s"] = [max(low, 0.0), high]
        else:
            peak = peaks[name]
            out[RATES[name]] = [peak / high if high > 0 else None,
                                peak / low if low > 0 else None]  # None: unbounded
    return out


def _stand_in(rows, f: dict, why: dict, fitted: set[str], c: dict) -> None:
    """What a rate the fit dropped is priced at (see the module docstring); one fitted but
    imprecise keeps its estimate."""
    if "m" not in fitted:
        ratios = [(g * f["g"] + a * f["a"]) / m for _, g, a, m in rows if m > 0]
        f["m"] = min(ratios) if ratios else 1.0
        why["bandwidth_bytes_per_s"] += "; set to the slowest bandwidth under which no step " \
            "would be: a lower bound"
    if "a" not in fitted and "g" in fitted:
        f["a"] = f["g"]
        why["attention_flops_per_s"] += "; priced at the GEMM rate"
    peaks = {"g": c["flops_per_s"], "a": c.get("attention_flops_per_s") or c["flops_per_s"]}
    for name, peak in peaks.items():
        if name not in fitted and "g" not in fitted:  # no stand-in: the starting rate stays
            why[RATES[name]] = why.get(RATES[name], "not fitted") + f"; {LEFT_AT} " \
                f"{_flops(peak)} the fit starts from, not a measurement"


LEFT_AT = "left at the"  # a rate kept at the fit's starting value: its reason says so


def _flops(rate: float) -> str:
    """100e9 -> '100 GFLOP/s', 990e12 -> '990 TFLOP/s'."""
    return f"{rate / 1e12:g} TFLOP/s" if rate >= 1e12 else f"{rate / 1e9:g} GFLOP/s"
