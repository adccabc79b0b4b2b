"""Fit the step model to measured steps: effective rates, fixed overhead and residual spread."""

import math

from servecap.ledger.errors import SpecError

SAMPLE_KEYS = ("duration_s", "num_prefill_tokens", "num_decode_tokens",
               "prefill_attention_tokens", "decode_context_tokens", "num_seqs")
CONSTANT_KEYS = ("weights_bytes", "kv_bytes_per_token", "flops_per_token",
                 "bandwidth_bytes_per_s", "flops_per_s")
ROUNDS = 8  # compute/memory-bound classification converges in a few rounds


def fit_step_model(samples: list[dict], constants: dict) -> dict:
    """Least squares of t = overhead + max(gemm_s / g + attention_s / a, memory_s / m) over
    the samples, where gemm_s, attention_s and memory_s are the speed-of-light terms from the
    constants (step_model.terms). Each step is classed compute- or memory-bound by the current
    fit, the linear system is solved, and the classes are revisited until they hold.
    Returns {"coefficients": {...}, "residual_cv", "rms_residual_s", "num_samples",
    "num_compute_bound"}: coefficients in the names --coefficients accepts (rates are the
    achieved ones: peak / factor) with step_time_cv the residuals' spread relative to each
    step's predicted time."""
    rows = [_terms(_check(s, i), constants) for i, s in enumerate(samples)]
    if len(rows) < 3:
        raise SpecError("samples", len(rows), "at least 3 measured steps to fit")
    factors = {"g": 1.0, "a": 1.0, "m": 1.0, "o": 0.0}
    for _ in range(ROUNDS):
        bound = [_compute_bound(r, factors) for r in rows]
        new = _solve(rows, bound)
        if new == factors:
            break
        factors = new
    return _report(rows, factors, constants)


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


def _compute_bound(row, f) -> bool:
    _, gemm, attention, memory = row
    return gemm * f["g"] + attention * f["a"] > memory * f["m"]


def _solve(rows, bound) -> dict:
    """Ordinary least squares on [1, gemm, attention, 0] (compute-bound) or [1, 0, 0, memory]
    rows; a factor with no support, or fitted <= 0, is held at 1 (the peak as given)."""
    cols = [0, 1, 2, 3]
    while True:
        design = [[(1.0, g if b else 0.0, a if b else 0.0, 0.0 if b else m)[j] for j in cols]
                  for (_, g, a, m), b in zip(rows, bound, strict=True)]
        target = [r[0] for r in rows]
        beta = _least_squares(design, target)
        bad = [cols[i] for i, v in enumerate(beta) if cols[i] and (v is None or v <= 0)]
        if not bad:
            break
        cols = [c for c in cols if c != bad[0]]
    fit = dict(zip(cols, beta, strict=True))
    return {"o": max(fit.get(0, 0.0), 0.0), "g": fit.get(1, 1.0), "a": fit.get(2, 1.0),
            "m": fit.get(3, 1.0)}


def _least_squares(x: list[list[float]], y: list[float]) -> list[float | None]:
    """Normal equations solved by Gaussian elimination with partial pivoting; None for a
    column with no support."""
    n = len(x[0])
    a = [[sum(r[i] * r[j] for r in x) for j in range(n)] + [sum(r[i] * t for r, t in
                                                              zip(x, y, strict=True))]
         for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            return [None if i == col else 0.0 for i in range(n)]
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                k = a[r][col] / a[col][col]
                a[r] = [v - k * p for v, p in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def _report(rows, f, c) -> dict:
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
            "num_samples": len(rows),
            "num_compute_bound": sum(_compute_bound(r, f) for r in rows)}
