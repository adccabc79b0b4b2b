"""`servecap fit` on screen: the answer, the candidates planned, and the ledger that binds."""

from rich.console import Console
from rich.table import Table

from servecap.ledger import fit as search
from servecap.ledger.units import fmt_bytes, fmt_gib, plural

from .fit_words import candidate
from .narrow import print_table


def headline(result: search.Fit) -> str:
    """One sentence: the answer, or that nothing in the range fits and which line binds."""
    q, answer, bind = result.question, result.answer, result.binding
    what = {"context": "longest context", "concurrency": "most requests",
            "tp": "smallest tensor-parallel size", "pp": "smallest pipeline-parallel size",
            "gpus": "fewest GPUs", "kv-dtype": "first KV dtype that fits",
            "weight-dtype": "first weight dtype that fits"}[q]
    if answer is None:
        line = f": {bind.label} binds" if bind else ""
        return f"nothing in the searched range fits{line}"
    serve = answer.plan.serve
    text = f"{what}: {candidate(q, answer.value)}"
    if q == "context":
        blocks = -(-serve.context_tokens // serve.block_size_tokens)
        text = (f"{what} for {plural(serve.concurrency, 'request')}: "
                f"{serve.context_tokens:,} tokens "
                f"({blocks:,} blocks of {serve.block_size_tokens})")
    elif q == "concurrency":
        text = f"{what} of {serve.context_tokens:,} tokens: {serve.concurrency:,}"
    if result.range_end:
        text += f"\n  = the end of the range searched: {result.range_end}"
    return text


def render_fit(result: search.Fit, console: Console | None = None) -> None:
    """The answer, the candidates planned, then the ledger at the answer and at the step past
    it; each table within 80 columns."""
    console = console or Console()
    q = result.question
    console.print(f"[bold]{headline(result)}[/bold]")
    shown = result.tried
    if q in ("context", "concurrency"):
        shown = [t for t in (result.answer, result.beyond) if t is not None]
    shown = [t for t in shown if t.deployment is not None]
    table = Table(title="candidates planned", title_justify="left")
    for name, just in (("candidate", "left"), ("fits", "left"), ("ceiling", "right"),
                       ("left GiB", "right")):
        table.add_column(name, justify=just, no_wrap=True)
    for t in shown:
        table.add_row(candidate(q, t.value), "yes" if t.fits else "no",
                      f"{t.plan.memory_ceiling_requests:,}", f"{t.plan.free_bytes / 2**30:,.2f}")
    print_table(console, table)
    _ledger(result, console)


def _ledger(result: search.Fit, console: Console) -> None:
    answer, beyond, bind = result.answer, result.beyond, result.binding
    plans = [(candidate(result.question, t.value), t.plan) for t in (answer, beyond)
             if t is not None and t.plan is not None]
    if not plans:
        return
    table = Table()  # the binding rank's, as plan's JSON and deployment view
    table.add_column("ledger line, GiB", no_wrap=True)
    for name, _ in plans:
        table.add_column(name, justify="right", no_wrap=True)
    if bind is not None:
        table.add_column("", no_wrap=True)
    labels = {item.key: item.label for _, p in reversed(plans) for item in p.lines}
    for key, label in labels.items():
        mark = ["binds" if key == bind.key else ""] if bind is not None else []
        table.add_row(label, *(f"{p.line(key) / 2**30:,.2f}" for _, p in plans), *mark)
    table.add_section()
    table.add_row("left", *(f"{p.free_bytes / 2**30:,.2f}" for _, p in plans),
                  *([""] if bind is not None else []))
    print_table(console, table)
    if answer is not None and answer.deployment.parallel.world_size > 1:
        console.print(f"at {plans[0][0]}: {answer.deployment.binding_reason}")
    if bind is not None and bind.key == "refused":
        console.print(f"next: {candidate(result.question, beyond.value)} is refused: {bind.why}")
    elif bind is not None:
        why = bind.why
        if why == "grew most" and answer is not None:
            why = f"the line that grows most from {candidate(result.question, answer.value)}"
        console.print(f"binds: {bind.label}, {fmt_gib(bind.num_bytes)} at "
                      f"{candidate(result.question, beyond.value)}, over by "
                      f"{_over(bind.over_bytes)}\n  ({why})")


def _over(num_bytes: int) -> str:
    """How far past the device the next candidate goes, in GiB, or in the unit that shows it
    where GiB would round it to 0.00 (one block past a fit is a few MiB)."""
    return fmt_gib(num_bytes) if num_bytes >= 0.005 * 2**30 else fmt_bytes(num_bytes)
