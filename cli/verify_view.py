"""A verification as rich tables: each ledger line predicted vs measured, phases, latency."""

from rich.console import Console
from rich.table import Table

from servecap.ledger.units import fmt_bytes, plural
from servecap.ledger.verification import FAILURE_TOLERANCE

from .narrow import print_table

STYLE = {"ok": "green", "violated": "bold red", "reported": "yellow"}


def render_verify(result, console: Console) -> None:
    """The binding rank in full (the only one without tensor parallelism), every rank in brief,
    then the verdict. A violation is not printed here: the command's exit line states it once."""
    if not result.ranks:
        print_table(console, _failures(result))
        return
    if len(result.ranks) > 1:
        print_table(console, _ranks(result), drop=("violated",))  # the exit line names it
    render_rank(result.binding, console, f" (rank {result.binding_rank}, binding)"
                if len(result.ranks) > 1 else "")
    if not violation_summary(result):  # a violation is said once, on stderr, by the command
        console.print("[green]every ledger line held on this device[/green]")


def _failures(result) -> Table:
    table = Table(title=f"{result.tensor_parallel_size} ranks: stopped, nothing reconciled",
                  title_justify="left")
    for name in ("failure", "verdict", "what happened"):
        table.add_column(name)
    from servecap.ledger.verification import failure_lines

    for check in failure_lines(result.failures):
        table.add_row(check.label, "[bold red]violated[/bold red]", check.detail)
    return table


def _ranks(result) -> Table:
    table = Table(title=f"{len(result.ranks)} ranks; the binding rank has the least headroom",
                  title_justify="left")
    for name in ("rank", "weights", "KV pool", "runtime peak", "headroom", "ceiling",
                 "violated"):
        table.add_column(name, justify="left" if name in ("rank", "violated") else "right")
    for r, rank in enumerate(result.ranks):
        measured, rec = rank.measured, rank.reconciliation
        headroom = next(c.measured_bytes for c in rec.lines if c.line == "safety")
        table.add_row(f"{r}{' (binding)' if r == result.binding_rank else ''}",
                      fmt_bytes(measured.weights_bytes), fmt_bytes(measured.kv_pool_bytes),
                      fmt_bytes(measured.runtime_peak_bytes), fmt_bytes(headroom),
                      f"{_count(rec.measured_ceiling_requests)} / "
                      f"{rec.predicted_ceiling_requests}",
                      ", ".join(rec.violations) or "-")
    return table


def render_rank(result, console: Console, which: str = "") -> None:
    rec, plan = result.reconciliation, result.plan
    table = Table(title=f"{plan.model}: plan vs device{which} ({fmt_bytes(plan.device_bytes)}, "
                  f"{result.record.get('device_name', '')})", title_justify="left")
    for name in ("ledger line", "predicted", "measured", "residual", "residual %", "verdict",
                 "tolerance"):
        table.add_column(name, justify="left" if name in ("ledger line", "tolerance")
                         else "right")
    for check in rec.lines:
        table.add_row(*_row(check))
    table.add_section()
    style = STYLE[rec.ceiling_verdict]
    measured = rec.measured_ceiling_requests
    table.add_row("memory ceiling (requests)", str(rec.predicted_ceiling_requests),
                  _count(measured),
                  "-" if measured is None else f"{measured - rec.predicted_ceiling_requests:+d}",
                  "-", f"[{style}]{rec.ceiling_verdict}[/{style}]", ceiling_tolerance(rec))
    print_table(console, table, drop=("residual %", "tolerance"))
    for line in detail_lines(rec):  # a failure's account: under the table, not in a cell
        console.print(line, markup=False, highlight=False)
    print_table(console, _phases(result.phases), drop=("non-torch", "reserved"))
    latency = result.latency  # the counts on a line of their own: a title wraps to the table
    console.print(f"the load: {latency['num_finished']} of "
                  f"{plural(latency['num_requests'], 'request')} finished", highlight=False)
    # the throughputs on a line of their own: beside the counts, a fast CPU's figures ran past
    # 80 columns and wrapped 'tokens/s' alone
    console.print(f"throughput: input {latency['input_tokens_per_s']:,.1f} tokens/s, output "
                  f"{latency['output_tokens_per_s']:,.1f} tokens/s", highlight=False)
    print_table(console, _latency(latency))
    check = result.latency.get("simulated_vs_measured")
    if check and check.get("verdict") == "underdetermined":
        console.print("the same load simulated: not predicted, the step-model fit is "
                      "underdetermined: " + "; ".join(f"{k} {v}" for k, v in
                                                     check["underdetermined"].items()))
    elif check:
        print_table(console, _simulated(check), drop=("verdict",))
    _calibration(result.calibration, console)
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def ceiling_tolerance(rec) -> str:
    """The ceiling row's rule: equal, unless the probe was skipped (then only reported)."""
    skipped = rec.measured_ceiling_requests is None and not rec.ceiling_failure
    return "not probed (--no-probe)" if skipped else "equal"


def detail_lines(rec) -> list[str]:
    """'line: what happened' for each line with an account (a failure's, a windowed KV
    line's) and the ceiling's when the probe measured nothing, printed under the table."""
    lines = [f"{c.line}: {c.detail}" for c in rec.lines if c.detail]
    if rec.ceiling_failure:
        lines.append(f"memory_ceiling: {rec.ceiling_failure}")
    return lines


def _row(check) -> tuple[str, ...]:
    style = STYLE.get(check.verdict, "")
    verdict = f"[{style}]{check.verdict}[/{style}]"
    if check.tolerance == FAILURE_TOLERANCE:  # no bytes to compare; the account goes below
        return (check.label, "-", "-", "-", "-", verdict, check.tolerance)
    pct = "-" if check.residual_pct is None else f"{check.residual_pct:+.2f}%"
    return (check.label, fmt_bytes(check.predicted_bytes), fmt_bytes(check.measured_bytes),
            fmt_bytes(check.residual_bytes), pct, verdict, check.tolerance)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _phases(phases) -> Table:
    table = Table(title="memory by phase", title_justify="left")
    for name in ("phase", "tensors", "tensor peak", "reserved", "non-torch", "process RSS"):
        table.add_column(name, justify="left" if name == "phase" else "right")
    for snap in phases:
        table.add_row(snap.phase, fmt_bytes(snap.tensor_bytes),
                      fmt_bytes(snap.peak_tensor_bytes), _maybe(snap.reserved_bytes),
                      _maybe(snap.non_torch_bytes), fmt_bytes(snap.process_rss_bytes))
    return table


def _maybe(num_bytes: int | None) -> str:
    return "-" if num_bytes is None else fmt_bytes(num_bytes)


def _latency(latency: dict) -> Table:
    table = Table(title="the load: ms from each request's arrival", title_justify="left")
    for name in ("ms", "p50", "p95", "p99", "mean"):
        table.add_column(name, justify="left" if name == "ms" else "right")
    for key in ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        row = latency.get(key)
        if row is None:
            continue
        table.add_row(key.removesuffix("_ms"), *("-" if row[k] is None else f"{row[k]:,.2f}"
                                                 for k in ("p50", "p95", "p99", "mean")))
    return table


def violation_summary(result) -> str:
    """'runtime_peak (measured 2.20 MiB vs predicted 1 MiB, <= declared budget); ...', each
    rank's prefixed 'rank N: ' under tensor parallelism; '' when every line held."""
    if not result.ranks:
        from servecap.ledger.verification import failure_lines

        return "; ".join(f"{c.line} ({c.detail})" for c in failure_lines(result.failures))
    if len(result.ranks) == 1:
        return _rank_violations(result.binding.reconciliation)
    return "; ".join(f"rank {r}: {text}" for r, rank in enumerate(result.ranks)
                     if (text := _rank_violations(rank.reconciliation)))


def _rank_violations(rec) -> str:
    parts = [f"{c.line} ({c.detail})" if c.detail else
             f"{c.line} (measured {fmt_bytes(c.measured_bytes)} vs predicted "
             f"{fmt_bytes(c.predicted_bytes)}, {c.tolerance})"
             for c in rec.lines if c.verdict == "violated"]
    if rec.ceiling_failure:
        parts.append(f"memory_ceiling ({rec.ceiling_failure})")
    elif rec.ceiling_verdict == "violated":
        parts.append(f"memory_ceiling (measured {rec.measured_ceiling_requests} vs predicted "
                     f"{plural(rec.predicted_ceiling_requests, 'request')})")
    return "; ".join(parts)


def _simulated(check: dict) -> Table:
    tol = check.get("tolerance") or {}
    within = f"verdict: agrees when within {tol['share']:.0%} or {tol['floor_ms']:g} ms of " \
        "measured (informational)" if tol else None
    table = Table(title=f"the same load simulated ({check['policy']}, the step model "
                  "calibrated on this run)", title_justify="left", caption=within,
                  caption_justify="left")
    for name in ("ms", "sim p50", "measured p50", "sim p95", "measured p95", "verdict"):
        table.add_column(name, justify="left" if name in ("ms", "verdict") else "right",
                         no_wrap=True)
    for key in ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        if key not in check:
            continue
        sim, run = check[key]["simulated"], check[key]["measured"]
        verdict = check[key].get("verdict", "-")
        style = {"agrees": "green", "disagrees": "yellow"}.get(verdict, "")
        table.add_row(key.removesuffix("_ms"), *(_ms(v) for v in (
            sim["p50"], run["p50"], sim["p95"], run["p95"])),
            f"[{style}]{verdict}[/{style}]" if style else verdict)
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _calibration(calibration: dict, console: Console) -> None:
    """The simulator's step-model fit in words: bandwidth in decimal GB/s and compute in
    TFLOP/s (as vendors state them), overhead in ms, each with its 95 % interval or the
    reason the steps could not pin it, and how well it explains the steps."""
    coef, fit = calibration.get("coefficients", {}), calibration.get("fit", {})
    if "bandwidth_bytes_per_s" not in coef or "measured_step_ms" not in fit:
        return
    console.print(f"step model calibrated on this run ({fit['num_steps']} steps of the "
                  f"declared load and the "
                  f"calibration sweep, {calibration.get('num_outliers', 0)} dropped as "
                  f"stalls): effective bandwidth "
                  f"{_fitted(calibration, 'bandwidth_bytes_per_s', 1e9, 'GB/s (decimal)')} of "
                  f"weights+KV per step, compute "
                  f"{_fitted(calibration, 'flops_per_s', 1e12, 'TFLOP/s', 4)}, attention "
                  f"{_fitted(calibration, 'attention_flops_per_s', 1e12, 'TFLOP/s', 4)}, "
                  f"overhead {_fitted(calibration, 'step_overhead_s', 1e-3, 'ms', 2)} per "
                  f"step; step p50/p95 measured {_ms(fit['measured_step_ms']['p50'])}/"
                  f"{_ms(fit['measured_step_ms']['p95'])} ms, replayed "
                  f"{_ms(fit['replayed_step_ms']['p50'])}/{_ms(fit['replayed_step_ms']['p95'])}"
                  f" ms; residual spread {calibration.get('residual_cv', 0):.1%} of a step "
                  f"({calibration.get('num_compute_bound', 0)} compute-bound)")
    for name, why in (calibration.get("underdetermined") or {}).items():
        console.print(f"[yellow]underdetermined:[/yellow] {name}: {why}")


def _fitted(calibration: dict, key: str, unit: float, label: str, digits: int = 3) -> str:
    """'1.46 GB/s (95 %: 1.2-1.7)', or the value marked underdetermined."""
    value = calibration["coefficients"].get(key, 0) / unit
    if key in (calibration.get("underdetermined") or {}):
        return f"{value:,.{digits}f} {label} (underdetermined)"
    low, high = (calibration.get("intervals") or {}).get(key, (None, None))
    if low is None or high is None:
        return f"{value:,.{digits}f} {label}"
    return f"{value:,.{digits}f} {label} (95 %: {low / unit:,.{digits}f}-{high / unit:,.{digits}f})"
