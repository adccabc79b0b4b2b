"""`servecap load` on screen: a progress bar during the run, then counts and latency tables."""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servecap.ledger.units import plural

from .narrow import print_table
from .steady_view import INTERVAL_COLUMNS, interval_table, window_line

METRICS = ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")


@contextmanager
def progress_bar(total: int, quiet: bool) -> Iterator[Callable]:
    """on_done(sent) advances the bar and counts failures in its label (stderr)."""
    console = Console(file=sys.stderr)
    failed = 0
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=quiet or not console.is_terminal) as bar:
        task = bar.add_task("requests", total=total)

        def on_done(sent) -> None:
            nonlocal failed
            failed += sent.outcome.status != "ok"
            bar.update(task, advance=1, description=f"requests ({failed} failed)")

        yield on_done


def counts(by_kind: dict) -> str:
    """'200: 8, 503: 1' from {'200': 8, '503': 1}: a count per kind, as a person writes it."""
    return ", ".join(f"{kind}: {n:,}" for kind, n in by_kind.items())


def render_load(report: dict, console: Console) -> None:
    console.print(f"[bold]{report['base_url']}[/bold] model {report['model']}, "
                  f"{report['source']}, {report['mode']}")
    errors = f" ({counts(report['errors'])})" if report["errors"] else ""
    http = counts(report["http_status_counts"]) or "none"
    console.print(f"offered {report['offered']}, completed {report['completed']}, failed "
                  f"{report['failed']}{errors}; HTTP {http}; output-length mismatches "
                  f"{report['output_token_mismatches']}", highlight=False)
    for example in report["error_examples"]:
        console.print(f"  [red]{example}[/red]")
    _render_prompt_check(report, console)
    console.print(f"{report['achieved_rps']:.2f} requests/s, "
                  f"{report['output_tokens_per_s']:.1f} output tokens/s over "
                  f"{report['duration_s']:.2f} s; latest send "
                  f"{report['max_send_lag_ms']:.1f} ms after its arrival")
    table = Table("metric (ms)", "p50", "p95", "p99", "mean")
    for name in METRICS:
        row = report[name]
        table.add_row(name, *("-" if row[k] is None else f"{row[k]:.2f}"
                              for k in ("p50", "p95", "p99", "mean")))
    print_table(console, table)
    _render_turns(report.get("turns", []), console)
    _render_window(report, console)
    console.print("queue: not observable from the stream (the server's "
                  "vllm:request_queue_time_seconds has it)")
    if "server_metrics" in report:
        m = report["server_metrics"]
        console.print(f"server: peak running {m['peak_running']}, peak waiting "
                      f"{m['peak_waiting']}, peak KV usage {m['peak_kv_usage']}, peak KV "
                      f"tokens in use {m['peak_kv_tokens_in_use']} of "
                      f"{m['kv_capacity_tokens']}")
        if m.get("prefix_cache_queried_tokens"):
            console.print(f"server prefix cache: {m['prefix_cache_hit_tokens']:,} of "
                          f"{m['prefix_cache_queried_tokens']:,} prompt tokens hit "
                          f"({m['prefix_cache_hit_share']:.1%})")
    if "kv_vs_ledger" in report:
        kv = report["kv_vs_ledger"]
        console.print(f"KV: measured peak {kv['measured_peak_kv_tokens']} tokens in use; the "
                      f"ledger's KV line for {plural(kv['peak_running'], 'request')} of "
                      f"{kv['context_tokens']} tokens: {kv['ledger_kv_tokens']} tokens "
                      f"({kv['ledger_kv_bytes'] / 2**30:.2f} GiB)")
    if "nvml" in report:
        nv = report["nvml"]
        peak = nv["peak_used_bytes"]
        console.print(f"NVML device {nv['device_index']}: peak used "
                      f"{'-' if peak is None else f'{peak / 2**30:.2f}'} GiB of "
                      f"{nv['total_bytes'] / 2**30:.2f} GiB")
    if "calibration" in report:
        _render_calibration(report["calibration"], console)
    if "compare_simulate" in report:
        _render_compare(report["compare_simulate"], console)


def _render_calibration(fit: dict, console: Console) -> None:
    """The fit in one line, and the server's terms outside the step: fitted, or why not."""
    c = fit["coefficients"]
    left = fit.get("samples_left_out", 0)
    left = f" ({left} left out: no gap to time)" if left else ""
    console.print(f"calibration: {fit['num_steps']} samples{left}, "
                  f"{fit['num_outliers']} outliers, "
                  f"residual CV {fit['residual_cv']:.2f}; step_overhead_s "
                  f"{c['step_overhead_s'] * 1e3:.3f} ms")
    terms = fit.get("server_terms", {})
    for name, value in terms.get("fitted", {}).items():
        console.print(f"  {name} {value * 1e3:.3f} ms (from the server's /metrics)")
    for name, why in terms.get("not_fitted", {}).items():
        console.print(f"  {name} not fitted: {why}")


def _render_compare(comp: dict, console: Console) -> None:
    table = Table("metric (ms)", "simulated p50", "measured p50", "simulated p95",
                  "measured p95", title=f"simulated ({comp['policy']}) vs measured")
    for name, row in comp["metrics"].items():
        sim, meas = row["simulated"], row["measured"]
        table.add_row(name, *(f"{v:.2f}" if v is not None else "-"
                              for v in (sim["p50"], meas["p50"], sim["p95"], meas["p95"])))
    print_table(console, table)


def _render_prompt_check(report: dict, console: Console) -> None:
    checked, wrong = report.get("prompt_tokens_checked", 0), report.get("prompt_token_mismatches")
    if not checked:
        return
    style = "red" if wrong else "green"
    console.print(f"prompt tokens of {plural(checked, 'request')} checked against the server's "
                  f"usage: [{style}]{wrong} mismatch{'' if wrong == 1 else 'es'}[/{style}]")
    for example in report["prompt_token_mismatch_examples"]:
        console.print(f"  [red]{example}[/red]")


def _render_turns(turns: list[dict], console: Console) -> None:
    """Per turn when there are conversations or the server reported its prefix cache."""
    if len(turns) < 2 and not any(t["cached_prompt_tokens"] for t in turns):
        return
    table = Table("turn", "requests", "done", "prompt", "cached", "cached %", "TTFT p50 ms",
                  title="per turn, mean tokens (cached: usage.prompt_tokens_details)")
    for t in turns:
        cached, share, ttft = t["mean_cached_prompt_tokens"], t["cached_share"], t["ttft_ms_p50"]
        table.add_row(str(t["turn"]), str(t["requests"]), str(t["completed"]),
                      f"{t['mean_prompt_tokens']:.1f}", "-" if cached is None else f"{cached:.1f}",
                      "-" if share is None else f"{share:.1%}",
                      "-" if ttft is None else f"{ttft:.2f}")
    print_table(console, table)


def _render_window(report: dict, console: Console) -> None:
    """The simulator's steady-state window of the run, with its 95 % intervals."""
    if "window" not in report:
        return
    window = report["window"]
    console.print(window_line({**window, "steady_state": report["steady_state"]},
                              slo_given="slo_target_attainment" in report))
    if not report["steady_state"]:
        console.print(f"[yellow]not at steady state ({report['steady_state_reason']}): the "
                      "window is every request; send more (--num-requests, --duration)"
                      "[/yellow]")
        return
    print_table(console, interval_table([("window", window)]), wrap=INTERVAL_COLUMNS)
