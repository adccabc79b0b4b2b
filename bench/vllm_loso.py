"""Leave one source out over the published runs: the all-runs fit (in sample), each source
predicted by the terms fitted without it (out of sample), and the nested prediction
intervals' coverage; what `bench/vllm_latency.py --leave-one-source-out` prints and, with
--write, keeps in sim/engine_fit.json for simulate's prediction intervals."""

import datetime
import json
import statistics

from vllm_cases import FAMILIES, Case
from vllm_fit import (
    GPU,
    NAMES,
    fittable,
    free_params,
    informing,
    interval_covers,
    jacobian,
    model_error,
    refine,
    run_rows,
    start,
)

from servecap.sim.vllm_engine import FIT_FILE, TERMS


def fit_all(cases: list[Case], log=print) -> dict:
    """The all-runs fit: terms, sources' hardware factors, rows, the Jacobian at the fit,
    which runs inform each term."""
    first = start(cases)
    base = [run_rows(c, first) for c in cases]
    log(f"start: {len(cases)} runs simulated; Jacobian ({len(first)} parameters)")
    jac0 = jacobian(cases, first, base)
    engine_free = fittable(informing(cases, jac0, first))
    every = list(range(len(cases)))
    free = free_params(engine_free, cases, every)
    values, rows = refine(cases, every, jac0, base, first, free, rounds=4)
    log("all-runs fit, first pass: " + _terms(values))
    jac = jacobian(cases, values, rows)
    values, rows = refine(cases, every, jac, rows, values, free, rounds=3)
    log("all-runs fit: " + _terms(values))
    return {"values": values, "rows": rows, "jacobian": jac, "free": engine_free,
            "informs": informing(cases, jac, values), "start": first, "start_rows": base,
            "start_jacobian": jac0}


def _terms(values: dict) -> str:
    return ", ".join(f"{n} {v:.3g}" for n, v in values.items())


def leave_one_source_out(cases: list[Case], log=print) -> dict:
    """fit_all, then per source: the terms refitted without it (fit_fold), its runs predicted
    with them at a hardware factor of 1; residuals out of sample; intervals nested (other
    sources' errors)."""
    every = fit_all(cases, log)
    sources = sorted({c.source for c in cases})
    oos: dict[int, list[dict]] = {}
    folds = {}
    for source in sources:
        train = [i for i, c in enumerate(cases) if c.source != source]
        values = fit_fold(cases, train, every)
        folds[source] = {n: values[n] for n in NAMES}
        for i, case in enumerate(cases):
            if case.source == source:
                oos[i] = run_rows(case, values | {GPU + source: 0.0})
        log(f"held out {source}: {sum(c.source == source for c in cases)} runs: "
            + _terms(folds[source]))
    out_rows = [r for i in range(len(cases)) for r in oos[i]]
    return {"every": every, "folds": folds, "in_sample": [r for rows in every["rows"]
                                                         for r in rows],
            "out_of_sample": nest_intervals(out_rows)}


def fit_fold(cases: list[Case], train: list[int], every: dict) -> dict:
    """The terms fitted on the training runs alone, as the all-runs fit was: from the same
    start (no run chose it), the terms the training runs inform (>= 3 runs from >= 2
    sources), Levenberg-Marquardt along the start's Jacobian and then the all-runs fit's,
    every step kept only if fresh simulations of the training runs lower their loss. The
    held-out runs never enter: not in a step, not in the start."""
    info = informing([cases[i] for i in train], [every["start_jacobian"][i] for i in train],
                     every["start"])
    free = free_params(fittable(info), cases, train)
    values, rows = refine(cases, train, every["start_jacobian"], every["start_rows"],
                          every["start"], free, rounds=4)
    values, _ = refine(cases, train, every["jacobian"], rows, values, free, rounds=3)
    return values


def nest_intervals(rows: list[dict]) -> list[dict]:
    """Each out-of-sample row with its 95 % prediction interval from the other sources'
    out-of-sample errors, and whether the measurement lies inside."""
    out = []
    for source in sorted({r["source"] for r in rows}):
        out += judged([r for r in rows if r["source"] == source],
                      model_error([r for r in rows if r["source"] != source]))
    return out


def judged(rows: list[dict], error: dict) -> list[dict]:
    """Each row with its 95 % prediction interval under the per-family model error `error`
    and whether the measurement lies inside (the held-out runs take the shipped fit's)."""
    return [r | {"covered": interval_covers(r, error), "prediction_interval": interval(r, error)}
            for r in rows]


def interval(row: dict, error: dict) -> list[float] | None:
    """[low, high] of the measured value the prediction allows: predicted x e^-q."""
    fam = error.get(row["family"])
    if fam is None:
        return None
    from math import exp
    return [row["predicted"] * exp(-fam["log_q975"]), row["predicted"] * exp(-fam["log_q025"])]


def summary(rows: list[dict]) -> dict:
    """Median |error| over every comparison and per family; runs, sources; and, out of
    sample, the share of measurements inside their 95 % prediction interval, over every
    figure and per family (each family's interval is sized by its own errors, so each can be
    calibrated or not on its own)."""
    def med(rs):
        return round(statistics.median(abs(r["error"]) for r in rs), 4) if rs else None
    out = {"comparisons": len(rows), "runs": len({r["fixture"] for r in rows}),
           "sources": len({r["source"] for r in rows}), "median_abs_error": med(rows),
           "families": {f: {"comparisons": len(fr), "median_abs_error": med(fr)}
                        for f in FAMILIES if (fr := [r for r in rows if r["family"] == f])}}
    if (inside := _inside(rows)) is not None:
        out["inside_95_interval"] = inside
        for f, fam in out["families"].items():
            fam["inside_95_interval"] = _inside([r for r in rows if r["family"] == f])
    return out


def _inside(rows: list[dict]) -> float | None:
    """The share of the rows' judged measurements inside their 95 % interval (None: none
    judged)."""
    judged = [r["covered"] for r in rows if r.get("covered") is not None]
    return round(sum(judged) / len(judged), 4) if judged else None


def write_fit(result: dict, command: str) -> dict:
    """sim/engine_fit.json: the all-runs terms (with the runs and sources that inform each),
    the per-fold terms, the out-of-sample model error per family, and both summaries."""
    every = result["every"]
    doc = {"about": "fitted by `python bench/vllm_latency.py --leave-one-source-out --write` on "
                    "tests/fixtures/vllm_bench (SOURCE.md); model_error: the 95 % range "
                    "(median -/+ 2.5 x 1.4826 x MAD) of ln(predicted / measured) out of "
                    "sample, per family",
           "date": datetime.date.today().isoformat(), "command": command,
           "terms": {n: {"value": float(f"{every['values'][n]:.4g}"), "what": TERMS[n],
                         "fitted": n in every["free"],
                         "informed_by_runs": len(every["informs"][n]["runs"]),
                         "informed_by_sources": every["informs"][n]["sources"]}
                     for n in NAMES},
           "hardware_factors": {k[len(GPU):]: round(2.718281828459045 ** v, 3)
                                for k, v in every["values"].items() if k.startswith(GPU)},
           "folds": {s: {n: float(f"{v:.4g}") for n, v in vals.items()}
                     for s, vals in result["folds"].items()},
           "model_error": model_error(result["out_of_sample"]),
           "summary_in_sample": summary(result["in_sample"]),
           "summary_out_of_sample": summary(result["out_of_sample"])}
    FIT_FILE.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc
