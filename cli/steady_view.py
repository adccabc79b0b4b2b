"""The measured window and the 95 % intervals in words: one line a run, a table of ± figures,
and the warning when a run did not reach steady state."""

from rich.table import Table

from servecap.ledger.units import plural

INTERVAL_KEYS = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("TPOT", "tpot_ms"),
                 ("e2e", "e2e_ms"))


def pm(estimate: float | None, interval: list[float] | None, digits: int = 2,
       scale: float = 1.0) -> str:
    """'26.50 ±0.30': the estimate and half its 95 % interval's width (--json has the
    bounds themselves); '±?' when the run could not bound a side (too few requests beyond
    a tail quantile)."""
    if estimate is None:
        return "-"
    text = f"{estimate * scale:,.{digits}f}"
    if not interval:
        return text
    if None in interval:
        return f"{text} ±?"
    return f"{text} ±{(interval[1] - interval[0]) / 2 * scale:,.{digits}f}"


def bounds(interval: list[float | None], digits: int = 2, sep: str = "-") -> str:
    """'19.60-20.10': an interval's ends; '?' for an end the run did not estimate."""
    return sep.join("?" if v is None else f"{v:,.{digits}f}" for v in interval)


def window_line(entry: dict) -> str:
    """What was measured and how sure: '1,406 of 2,000 requests measured at steady state
    (warm-up 400, drain 194), spanning 12.3 request lifetimes; goodput 3.92 ±0.05 req/s;
    SLO met 99.1 ±0.5 %'. The lifetimes are those of the requests measured (window_lifetimes:
    every request when not steady), not of a candidate window the steady-state test refused."""
    where = "at steady state" if entry["steady_state"] else "(no steady state: every request)"
    warm = f" (warm-up {entry['warmup_requests']:,}, drain {entry['drain_requests']:,})" \
        if entry["steady_state"] else ""
    runs = f" over {entry['num_runs']} step-time seeds" if entry.get("num_runs", 1) > 1 else ""
    span = f", spanning {entry['window_lifetimes']:,.1f} request lifetimes" \
        if entry.get("window_lifetimes") is not None else ""
    return (f"{entry['measured_requests']:,} of {plural(entry['offered'], 'request')} measured "
            f"{where}{warm}{runs}{span}; goodput "
            f"{pm(entry['goodput_rps'], entry['goodput_rps_ci'])}"
            f" req/s; SLO met {pm(entry['slo_attainment'], entry['slo_attainment_ci'], 1, 100)}"
            " %")


def warning_line(entry: dict, label: str) -> str | None:
    """The one-line warning for a run that did not reach steady state, or None."""
    if entry["steady_state"]:
        return None
    return (f"warning: {label}: not at steady state ({entry['steady_state_reason']}): its "
            "figures include warm-up and drain; give it more requests (--num-requests)")


def interval_table(entries: list[tuple[str, dict]]) -> Table:
    """One row per run and metric: p50 and p99 in ms, each ± half its 95 % interval."""
    table = Table(title="latency ms, 95 % intervals (± half width)")
    for col in ("run", "metric", "p50", "p99"):
        table.add_column(col, justify="left" if col in ("run", "metric") else "right")
    for name, entry in entries:
        for label, key in INTERVAL_KEYS:
            stats, ci = entry.get(key), entry.get(f"{key}_ci") or {}
            if stats is None:
                continue
            table.add_row(name, label, pm(stats["p50"], ci.get("p50"), 1),
                          pm(stats["p99"], ci.get("p99"), 1))
    return table
