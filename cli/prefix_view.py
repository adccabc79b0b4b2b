"""servecap prefix as a person reads it: the hit rate, what it buys, the groups, warnings."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servecap.ledger.units import plural

BAR_FROM_BYTES = 8 * 2**20  # a trace this large shows a progress bar while it is read
SHOWN_GROUPS = 10
SHOWN_WARNINGS = 5
GIB = 2**30


@contextmanager
def reading_bar(path: Path, quiet: bool = False, console: Console | None = None
                ) -> Iterator[Callable[[int], None] | None]:
    """A bar over the bytes read, on stderr, for a large trace read at a terminal."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    console = console or Console(stderr=True)
    if quiet or size < BAR_FROM_BYTES or not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(path.name, total=size)
        yield lambda n: bar.advance(task, n)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def render_prefix(report: dict, console: Console) -> None:
    bs = report["block_size"]
    console.print(f"[bold]{report['source']}[/]: {plural(report['requests'], 'request')}, "
                  f"{report['prompt_tokens_all']:,} prompt tokens; {report['model']}, "
                  f"{bs:,}-token blocks, pool {report['pool_blocks']:,} blocks "
                  f"({report['pool_blocks'] * bs:,} tokens)")
    if report.get("tokenizer"):
        console.print(f"text prompts tokenized with {report['tokenizer']}'s tokenizer.json")
    table = Table(title="Prefix-cache reuse (full blocks only)", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("hit rate, plan's pool (LRU)", _pct(report["hit_rate"]))
    table.add_row("  cached / prompt tokens",
                  f"{report['cached_tokens']:,} / {report['prompt_tokens']:,}")
    table.add_row("hit rate, unbounded pool", _pct(report["hit_rate_unbounded"]))
    table.add_row("  reusable / prompt tokens",
                  f"{report['reusable_tokens']:,} / {report['prompt_tokens_all']:,}")
    table.add_row("full blocks: all / distinct / shared",
                  f"{report['blocks_total']:,} / {report['blocks_distinct']:,} / "
                  f"{report['blocks_shared']:,}")
    table.add_row("pool saved, all resident at once",
                  f"{report['pool_tokens_saved']:,} tokens, "
                  f"{report['pool_bytes_saved'] / GIB:.3f} GiB")
    console.print(table)
    _groups(report, console)
    _ttft(report["ttft"], console)
    for w in report["short_prefix_warnings"][:SHOWN_WARNINGS]:
        console.print(f"[yellow]warning:[/] {w['warning']} (first at line {w['first_line']})")
    more = len(report["short_prefix_warnings"]) - SHOWN_WARNINGS
    if more > 0:
        console.print(f"[yellow]warning:[/] {more:,} more short shared prefixes (--json)")
    for note in report["notes"]:
        console.print(f"note: {note}", style="dim")


def _groups(report: dict, console: Console) -> None:
    groups = report["groups"]
    if not groups:
        console.print("No two requests share a full block.")
        return
    table = Table(title="Prefix groups (deepest shared full block)", title_justify="left")
    for name in ("group", "prefix tok", "requests", "reusable", "cached", "line"):
        table.add_column(name, justify="left" if name == "group" else "right")
    for g in groups[:SHOWN_GROUPS]:
        table.add_row(g["group"], f"{g['prefix_tokens']:,}", f"{g['requests']:,}",
                      f"{g['reusable_tokens']:,}", f"{g['cached_tokens']:,}",
                      str(g["first_line"]))
    console.print(table)
    if len(groups) > SHOWN_GROUPS:
        console.print(f"... and {len(groups) - SHOWN_GROUPS:,} more groups (--json)")


def _ttft(ttft: dict, console: Console) -> None:
    if not ttft["simulated"]:
        console.print(f"TTFT not simulated: {ttft['why']}.")
        return
    on, off = ttft["with_prefix_caching"], ttft["without_prefix_caching"]
    table = Table(title=f"Simulated TTFT ({on['policy']})", title_justify="left",
                  caption=f"arrivals: {ttft['arrivals']}", caption_justify="left")
    for name in ("prefix caching", "TTFT p50 ms", "TTFT p99 ms", "prefill tokens"):
        table.add_column(name, justify="left" if name == "prefix caching" else "right")
    for label, row in (("on", on), ("off", off)):
        t = row["ttft_ms"]
        table.add_row(label, _ms(t.get("p50")), _ms(t.get("p99")), f"{row['prefill_tokens']:,}")
    console.print(table)


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"
