"""The measured window and the 95 % intervals in words: one line a run, a table of ± figures
(the bounds where an interval is not symmetric about its estimate), and the warning when a run
did not reach steady state."""

from rich.table import Table

from servecap.ledger.units import plural

INTERVAL_KEYS = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("TPOT", "tpot_ms"),
                 ("e2e", "e2e_ms"))


def symmetric(estimate: float, interval: list[float], digits: int = 2,
              scale: float = 1.0) -> bool:
    """Whether 'estimate ±half' states the interval's ends as printed: the estimate lies in the
    middle to within half the last digit shown. A share at 100 % with [72.2, 100] is not (its
    '±13.9' would read up to 113.9)."""
    low, high = interval
    return abs((high - estimate) - (estimate - low)) * scale <= 0.5 * 10 ** -digits


def pm(estimate: float | None, interval: list[float] | None, digits: int = 2,
       scale: float = 1.0, unit: str = "", label: str = "95 %: ") -> str:
    """'26.50 ±0.30 unit': the estimate and half its 95 % interval's width (--json has the
    bounds themselves) where the interval is symmetric about it; else the estimate and the
    bounds, '100.0 % (95 %: 72.2-100.0)' (`label` before them); '±?' when the run could not
    bound a side (too few requests beyond a tail quantile)."""
    if estimate is None:
        return "-"
    text = f"{estimate * scale:,.{digits}f}"
    if not interval:
        return text + unit
    if None in interval:
        return f"{text} ±?{unit}"
    if not symmetric(estimate, interval, digits, scale):
        return f"{text}{unit} ({label}{bounds([v * scale for v in interval], digits)})"
    return f"{text} ±{(interval[1] - interval[0]) / 2 * scale:,.{digits}f}{unit}"


def half(estimate: float, interval: list[float | None] | None, digits: int = 2,
         scale: float = 1.0) -> str:
    """' ±0.30' after an estimate whose bounds are printed beside it anyway: '' where the
    interval is not symmetric about the estimate (the bounds say it), ' ±?' where an end is
    unknown."""
    if not interval:
        return ""
    if None in interval:
        return " ±?"
    if not symmetric(estimate, interval, digits, scale):
        return ""
    return f" ±{(interval[1] - interval[0]) / 2 * scale:,.{digits}f}"


def share_cell(share: float, interval: list[float] | None) -> str:
    """A share in whole % for a table cell: '97±4', or '100 (88-100)' where the interval is
    not symmetric about it."""
    text = f"{share * 100:.0f}"
    if not interval or None in interval:
        return text
    if not symmetric(share, interval, 0, 100):
        return f"{text} ({bounds([v * 100 for v in interval], 0)})"
    return f"{text}±{(interval[1] - interval[0]) / 2 * 100:.0f}"


def bounds(interval: list[float | None], digits: int = 2, sep: str = "-") -> str:
    """'19.60-20.10': an interval's ends; '?' for an end the run did not estimate."""
    return sep.join("?" if v is None else f"{v:,.{digits}f}" for v in interval)


def window_line(entry: dict, slo_given: bool = True) -> str:
    """What was measured and how sure: '1,406 of 2,000 requests measured at steady state
    (warm-up 400, drain 194), spanning 12.3 request lifetimes; goodput 3.92 ±0.05 req/s;
    SLO met 99.1 % (95 %: 98.2-99.6)'. The lifetimes are those of the requests measured
    (window_lifetimes: every request when not steady), not of a candidate window the
    steady-state test refused. With no SLO given every request meets it: the line says so
    instead of an attainment."""
    where = "at steady state" if entry["steady_state"] else "(no steady state: every request)"
    warm = f" (warm-up {entry['warmup_requests']:,}, drain {entry['drain_requests']:,})" \
        if entry["steady_state"] else ""
    runs = f" over {entry['num_runs']} step-time seeds" if entry.get("num_runs", 1) > 1 else ""
    span = f", spanning {entry['window_lifetimes']:,.1f} request lifetimes" \
        if entry.get("window_lifetimes") is not None else ""
    slo = (f"SLO met {pm(entry['slo_attainment'], entry['slo_attainment_ci'], 1, 100, ' %')}"
           if slo_given else "no SLO given (--slo-ttft, --slo-tpot, --slo-e2e): every "
           "request counts")
    return (f"{entry['measured_requests']:,} of {plural(entry['offered'], 'request')} measured "
            f"{where}{warm}{runs}{span}; goodput "
            f"{pm(entry['goodput_rps'], entry['goodput_rps_ci'], unit=' req/s')}; {slo}")


def warning_line(entry: dict, label: str) -> str | None:
    """The one-line warning for a run that did not reach steady state, or None."""
    if entry["steady_state"]:
        return None
    return (f"warning: {label}: not at steady state ({entry['steady_state_reason']}): its "
            "figures include warm-up and drain; give it more requests (--num-requests)")


INTERVAL_COLUMNS = ("p50", "p99")


def interval_table(entries: list[tuple[str, dict]]) -> Table:
    """One row per run and metric: p50 and p99 in ms, each ± half its 95 % interval, or the
    interval's bounds where it is not symmetric about the estimate (a quantile's usually)."""
    table = Table(title="latency ms, 95 % intervals (± half width, or (low-high))")
    for col in ("run", "metric"):
        table.add_column(col)
    for col in INTERVAL_COLUMNS:  # print_table(..., wrap=INTERVAL_COLUMNS): bounds may wrap
        table.add_column(col, justify="right")
    for name, entry in entries:
        for label, key in INTERVAL_KEYS:
            stats, ci = entry.get(key), entry.get(f"{key}_ci") or {}
            if stats is None:
                continue
            table.add_row(name, label, pm(stats["p50"], ci.get("p50"), 1, label=""),
                          pm(stats["p99"], ci.get("p99"), 1, label=""))
    if any("±?" in str(cell) for column in table.columns for cell in column.cells):
        table.caption, table.caption_justify = UNBOUNDED, "left"
    return table


UNBOUNDED = ("±?: too few requests beyond that percentile to bound one side of its interval "
             "(--json has the other side)")


def prediction_line(entry: dict, label: str) -> str | None:
    """The run's 95 % prediction intervals (the model's own error, measured out of sample on
    published vLLM runs, with the sampling interval) on one line; None when it has none."""
    pred = entry.get("prediction_interval") or {}
    if not pred.get("available"):
        return None
    parts = [f"{name} p50 {pair['p50'][0]:,.1f}-{pair['p50'][1]:,.1f} ms"
             for name, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms"))
             if (pair := pred.get(key)) and "p50" in pair]
    if pred.get("output_tokens_per_s"):
        low, high = pred["output_tokens_per_s"]
        parts.append(f"output {low:,.0f}-{high:,.0f} tok/s")
    return (f"{label}: 95 % prediction interval (model error out of sample + sampling): "
            + "; ".join(parts))
