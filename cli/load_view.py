"""`servecap load` on screen: a progress bar during the run, then counts and latency tables."""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .narrow import print_table

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
    console.print("queue: not observable from the stream (the server's "
                  "vllm:request_queue_time_seconds has it)")
    if "server_metrics" in report:
        m = report["server_metrics"]
        console.print(f"server: peak running {m['peak_running']}, peak waiting "
                      f"{m['peak_waiting']}, peak KV usage {m['peak_kv_usage']}, peak KV "
                      f"tokens in use {m['peak_kv_tokens_in_use']} of "
                      f"{m['kv_capacity_tokens']}")
    if "kv_vs_ledger" in report:
        kv = report["kv_vs_ledger"]
        console.print(f"KV: measured peak {kv['measured_peak_kv_tokens']} tokens in use; the "
                      f"ledger's KV line for {kv['peak_running']} requests of "
                      f"{kv['context_tokens']} tokens: {kv['ledger_kv_tokens']} tokens "
                      f"({kv['ledger_kv_bytes'] / 2**30:.2f} GiB)")
    if "nvml" in report:
        nv = report["nvml"]
        peak = nv["peak_used_bytes"]
        console.print(f"NVML device {nv['device_index']}: peak used "
                      f"{'-' if peak is None else f'{peak / 2**30:.2f}'} GiB of "
                      f"{nv['total_bytes'] / 2**30:.2f} GiB")
    if "compare_simulate" in report:
        _render_compare(report["compare_simulate"], console)


def _render_compare(comp: dict, console: Console) -> None:
    table = Table("metric (ms)", "simulated p50", "measured p50", "simulated p95",
                  "measured p95", title=f"simulated ({comp['policy']}) vs measured")
    for name, row in comp["metrics"].items():
        sim, meas = row["simulated"], row["measured"]
        table.add_row(name, *(f"{v:.2f}" if v is not None else "-"
                              for v in (sim["p50"], meas["p50"], sim["p95"], meas["p95"])))
    print_table(console, table)
