"""The plan as a rich table: each ledger line with bytes, GiB and where it came from."""

from rich.console import Console
from rich.table import Table

from servecap.ledger.plan import Plan
from servecap.ledger.units import fmt_bytes, fmt_gib, plural

from .narrow import print_table


def render_plan(plan: Plan, console: Console, heading: str = "", notes: bool = True) -> None:
    serve = plan.serve
    title = (f"{plan.model} on {serve.device_label or fmt_gib(plan.device_bytes)}: "
             f"{_load(plan)}")
    if heading:  # one line where it fits, else the ranks on a line of their own
        joined = f"{heading} | {title}"
        title = joined if len(joined) <= console.width else f"{heading}\n{title}"
    table = Table(title=title, title_justify="left")
    table.add_column("ledger line", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("GiB (2^30)", justify="right", no_wrap=True)
    table.add_column("from", overflow="fold")
    sources = Sources(console.width >= WIDE, _from_width(plan, console.width))
    for item in plan.lines:
        table.add_row(item.label, f"{item.num_bytes:,}", f"{item.num_bytes / 2**30:,.2f}",
                      sources.cell(item.source + _mark(item)))
        if item.key == "kv_cache":
            _kv_kinds(plan, table, sources)
    table.add_section()
    table.add_row("committed + reserved", f"{plan.committed_bytes:,}",
                  f"{plan.committed_bytes / 2**30:,.2f}", sources.cell("sum of the above"))
    table.add_row("device", f"{plan.device_bytes:,}", f"{plan.device_bytes / 2**30:,.2f}",
                  sources.cell(serve.device_label))
    style = "green" if plan.fits else "bold red"
    table.add_row(f"[{style}]left[/{style}]", f"[{style}]{plan.free_bytes:,}[/{style}]",
                  f"[{style}]{plan.free_bytes / 2**30:,.2f}[/{style}]",
                  sources.cell("device - committed"))
    print_table(console, table)
    sources.print(console)
    _summary(plan, console, notes)


WIDE = 120  # below this the long "from" texts become numbered notes under the table


class Sources:
    """The "from" column: in place on a wide terminal; on a narrow one a short text stays in
    place and a long one becomes [n], printed under the table, so no row wraps."""

    def __init__(self, inline: bool, short: int = 18) -> None:
        self.inline, self.short = inline, short
        self.notes: list[str] = []

    def cell(self, text: str) -> str:
        if self.inline or len(text.replace("\\[", "[")) <= self.short:
            return text
        self.notes.append(text)
        return f"\\[{len(self.notes)}]"

    def print(self, console: Console) -> None:
        for number, text in enumerate(self.notes, start=1):
            console.print(f"\\[{number}] {text}", style="dim", highlight=False)


def _from_width(plan: Plan, width: int) -> int:
    """Characters left for the "from" column once the other three fit whole (13 for the
    borders and padding of four columns, 10 for the GiB column)."""
    labels = [item.label for item in plan.lines] + ["committed + reserved",
                                                    "  sliding-window layers"]
    numbers = [f"{n:,}" for n in (plan.committed_bytes, plan.device_bytes, plan.free_bytes)]
    gib = max(10, *(len(f"{n / 2**30:,.2f}") for n in (plan.committed_bytes, plan.free_bytes)))
    return max(4, width - max(map(len, labels)) - max(map(len, numbers)) - gib - 13)


def _kv_kinds(plan: Plan, table: Table, sources: "Sources") -> None:
    """Hybrid models: the KV line's full-attention and windowed layers, each on its own row
    (dim: parts of the line above, not added again)."""
    kinds = plan.kv_in_use_by_kind
    if not all(kinds.get(kind) for kind in ("full", "sliding")):
        return
    window = plan.window_tokens or 0
    for kind, label, source in (
            ("full", "  full-attention layers", "every live token"),
            ("sliding", "  sliding-window layers",
             f"the {window:,}-token window, its prefill in flight (W - 1 + "
             f"{plan.window_in_flight_tokens:,} tokens in flight + 1 block at most)")):
        table.add_row(label, f"{kinds[kind]:,}", f"{kinds[kind] / 2**30:,.2f}",
                      sources.cell(f"{source} (part of the line above)"), style="dim")


def _load(plan: Plan) -> str:
    serve = plan.serve
    if serve.lengths:
        return f"{plural(len(serve.lengths), 'request')}, Σ {sum(serve.lengths):,} live tokens"
    return f"{serve.concurrency} x {serve.context_tokens:,} tokens"


def _summary(plan: Plan, console: Console, notes: bool = True) -> None:
    kinds = {k: v for k, v in plan.kv_bytes_by_kind.items() if v}
    split = ", ".join(f"{k} layers {fmt_bytes(v)}" for k, v in kinds.items())
    console.print(f"KV per token: {plan.kv_bytes_per_token:,} B = "
                  f"{fmt_bytes(plan.kv_bytes_per_token)}; per request: "
                  f"{plan.kv_bytes_per_request:,} B = {fmt_gib(plan.kv_bytes_per_request)}"
                  + (f" ({split})" if len(kinds) > 1 else ""))
    rows = "; ".join(f"{name} {dtype} ({bits} bits)" for name, dtype, bits, _ in
                     plan.representations)
    console.print(f"representations: {rows}")
    for item in plan.host:  # host memory this rank holds: not a device line
        console.print(f"host memory (not the device): {item.label} {item.num_bytes:,} B = "
                      f"{fmt_gib(item.num_bytes)} ({item.source})")
    verdict = "[green]fits[/green]" if plan.fits else "[bold red]does not fit[/bold red]"
    console.print(f"memory-only ceiling: {_ceiling_text(plan)}; declared load {verdict}"
                  + _over(plan))
    console.print("  (memory only: not a latency promise; see servecap simulate)", style="dim")
    if notes:
        print_notes(plan.notes, console)


MAX_NOTES_SHOWN = 12  # a model file's notes are a few lines; --json lists every one
MAX_NOTE_CHARS = 400


def print_notes(notes, console: Console) -> None:
    """The first MAX_NOTES_SHOWN notes, each cut at MAX_NOTE_CHARS, as plain text (a note
    is the file's text, never rich markup), then how many more there are."""
    for note in notes[:MAX_NOTES_SHOWN]:
        text = note if len(note) <= MAX_NOTE_CHARS else note[:MAX_NOTE_CHARS] + " ..."
        console.print(f"note: {text}", style="yellow", markup=False, highlight=False)
    if len(notes) > MAX_NOTES_SHOWN:
        console.print(f"note: ... and {len(notes) - MAX_NOTES_SHOWN:,} more notes (--json "
                      "lists every one)", style="yellow", markup=False)


def _mark(item) -> str:
    """[measured] on a measured value, unless its source already says it was declared."""
    return r" \[measured]" if item.measured and not item.source.startswith("declared") else ""


def _ceiling_text(plan: Plan) -> str:
    """With --lengths the ceiling counts requests of the mix's average length; the longest
    request's ceiling is said beside it."""
    ceiling = f"[bold]{plural(plan.memory_ceiling_requests, 'request')}[/bold]"
    if plan.longest_ceiling_requests is None:
        return f"{ceiling} of {plan.serve.context_tokens:,} tokens"
    mean = sum(plan.serve.lengths) / len(plan.serve.lengths)
    return (f"{ceiling} of the mix's average ({mean:,.0f} tokens), "
            f"{plural(plan.longest_ceiling_requests, 'request')} of its longest "
            f"({plan.serve.context_tokens:,} tokens)")


def over_ceiling(plan: Plan) -> str:
    """'declared 20 > ceiling 15' when the declared count is past the memory-only ceiling,
    else ''."""
    declared = len(plan.serve.lengths) or plan.serve.concurrency
    ceiling = plan.memory_ceiling_requests
    return f"declared {declared:,} > ceiling {ceiling:,}" if declared > ceiling else ""


def _over(plan: Plan) -> str:
    """Say why a load does not fit when it is the count."""
    text = "" if plan.fits else over_ceiling(plan)
    return f" ({text})" if text else ""
