"""A verification as one JSON object: the reconciliation's stable keys first, integer bytes."""


def verify_to_dict(result) -> dict:
    """Stable contract: lines (line, predicted_bytes, measured_bytes, residual_bytes, verdict),
    predicted_ceiling_requests, measured_ceiling_requests, phases, record (of the binding rank);
    tensor_parallel_size and binding_rank; with more than one rank, `ranks` holds each one.
    simulation_verdict: the simulated-vs-measured latency check's verdict (agrees, disagrees,
    underdetermined: the step-model fit could not pin a rate, so nothing was predicted; n/a;
    None without the simulator), informational: `ok` does not depend on it."""
    if not result.ranks:
        return failed_to_dict(result)
    out = rank_to_dict(result.binding)
    out["tensor_parallel_size"] = result.tensor_parallel_size
    out["binding_rank"] = result.binding_rank
    out["violations"] = violations(result)
    out["ok"] = not out["violations"]
    if len(result.ranks) > 1:
        out["ranks"] = [rank_to_dict(rank) for rank in result.ranks]
    return out


def failed_to_dict(result) -> dict:
    """Ranks that failed: nothing was reconciled; each failure is a violated line."""
    from servecap.ledger.verification import failure_lines

    lines = [_line(check) for check in failure_lines(result.failures)]
    return {"lines": lines, "predicted_ceiling_requests": None,
            "measured_ceiling_requests": None, "phases": [], "record": {},
            "tensor_parallel_size": result.tensor_parallel_size, "binding_rank": None,
            "violations": [line["line"] for line in lines], "ok": False}


def violations(result) -> list[str]:
    """Violated lines; with several ranks each is prefixed 'rank N: '."""
    if len(result.ranks) == 1:
        return list(result.binding.reconciliation.violations)
    return [f"rank {r}: {name}" for r, rank in enumerate(result.ranks)
            for name in rank.reconciliation.violations]


def rank_to_dict(result) -> dict:
    """One rank's (or the only) verification."""
    rec, plan = result.reconciliation, result.plan
    return {
        "lines": [_line(check) for check in rec.lines],
        "predicted_ceiling_requests": rec.predicted_ceiling_requests,
        "measured_ceiling_requests": rec.measured_ceiling_requests,
        "phases": [snap.as_dict() for snap in result.phases],
        "record": result.record,
        "ceiling_verdict": rec.ceiling_verdict,
        "ceiling_detail": rec.ceiling_failure,  # why the probe measured nothing ("" if it did)
        "violations": list(rec.violations),
        "ok": not rec.violations,
        "model": plan.model,
        "device_bytes": plan.device_bytes,
        "latency": result.latency,
        "simulation_verdict": (result.latency.get("simulated_vs_measured") or {}).get(
            "verdict"),
        "calibration": result.calibration,
        "ceiling_probe": result.probe,
        "notes": list(result.notes),
    }


def _line(check) -> dict:
    return {"line": check.line, "predicted_bytes": check.predicted_bytes,
            "measured_bytes": check.measured_bytes, "residual_bytes": check.residual_bytes,
            "verdict": check.verdict, "label": check.label,
            "residual_pct": check.residual_pct, "tolerance": check.tolerance,
            "detail": check.detail}
