"""A Comparison (scenario/diff.py) on screen and as JSON: one table of figures, each change's
reason as a numbered note, each release cited once with vLLM's source at its tag."""

from rich.console import Console
from rich.table import Column, Table

from servecap.scenario.diff import Comparison, Figure, _version

from .narrow import print_table


def render(result: Comparison, console: Console | None = None) -> None:
    console = console or Console()
    plan = result.a.result.deployment.plan
    serve = plan.serve
    console.print(f"{plan.model} on {serve.device_label or f'{serve.device_bytes:,} B'}: "
                  f"{serve.concurrency} x {serve.context_tokens:,} tokens (the binding rank)",
                  highlight=False)
    for name, side in (("A", result.a), ("B", result.b)):
        console.print(f"{name}: {side.label}", highlight=False)
    notes: list[str] = []
    table = Table("figure", Column("A", justify="right"), Column("B", justify="right"),
                  Column("B - A", justify="right"), "why")
    for section, figures in (("ledger line (GiB)", result.lines), ("pool", result.pool),
                             ("outcome", result.outcome)):
        table.add_row(f"[bold]{section}[/bold]", "", "", "", "")
        for figure in figures:
            label = _labelled(figure, section == "ledger line (GiB)")
            table.add_row(label, _value(figure, figure.a), _value(figure, figure.b),
                          _delta(figure), _why(figure, notes))
    print_table(console, table, drop=("why",))
    for number, text in enumerate(notes, start=1):
        console.print(f"\\[{number}] {text}", highlight=False)
    for tag, source in _sources(result).items():
        console.print(f"{tag}: {source}", style="dim", highlight=False)
    for name, side in (("A", result.a), ("B", result.b)):
        if side.result.advice is not None:
            console.print(f"{name}: {side.result.advice.text}", highlight=False, markup=False)
        if side.dropped:
            console.print(f"{side.engine}: planned without {', '.join(side.dropped)} (another "
                          "engine's)", highlight=False)


def _labelled(figure: Figure, in_gib_section: bool) -> str:
    """The row's label with its unit where the section does not give it: 'KV pool (GiB)',
    'GPU KV cache size (tokens)'."""
    unit = {"bytes": None if in_gib_section else "GiB", "tokens": "tokens"}.get(figure.unit)
    if unit is None:
        return figure.label
    if figure.label.endswith(")"):
        return f"{figure.label[:-1]}, {unit})"
    return f"{figure.label} ({unit})"


def _value(figure: Figure, value) -> str:
    if value is None:
        return "-"
    if figure.unit == "bool":
        return "yes" if value else "no"
    if figure.unit == "bytes":
        return f"{value / 2**30:,.2f}"
    if figure.unit == "x":  # vLLM's 'Maximum concurrency ...: 3.48x'
        return f"{value:,.2f}x"
    return f"{value:,}"


def _delta(figure: Figure) -> str:
    if not figure.changed:
        return ""
    if figure.unit == "bool" or None in (figure.a, figure.b):
        return "changed"
    delta = figure.b - figure.a
    text = _value(figure, abs(delta))
    return ("+" if delta > 0 else "-") + text


def _why(figure: Figure, notes: list[str]) -> str:
    if not figure.changed:
        return ""
    if figure.reasons:
        text = "; ".join(reason.text() for reason in figure.reasons)
    elif figure.sides:
        text = f"A: {figure.sides[0]} | B: {figure.sides[1]}"
    else:
        return ""
    if text not in notes:
        notes.append(text)
    return f"\\[{notes.index(text) + 1}]"


def _sources(result: Comparison) -> dict[str, str]:
    """Each release a reason names, once, with the source its row cites."""
    out: dict[str, str] = {}
    for figure in result.lines + result.pool + result.outcome:
        for reason in figure.reasons:
            out.setdefault(reason.tag, reason.source)
    return dict(sorted(out.items(), key=lambda item: _version(item[0])))


def to_dict(result: Comparison) -> dict:
    """The comparison for scripts: integer bytes, each side's engine and release."""
    plan = result.a.result.deployment.plan
    return {
        "model": plan.model, "device": plan.serve.device_label,
        "device_bytes": plan.serve.device_bytes,
        "a": _side(result.a), "b": _side(result.b),
        "lines": [_figure(f) for f in result.lines],
        "pool": [_figure(f) for f in result.pool],
        "outcome": [_figure(f) for f in result.outcome],
    }


def _side(side) -> dict:
    return {"engine": side.engine, "release": side.row.tag if side.row else None,
            "model_runner": side.runner, "starts": side.starts,
            "fits": side.result.deployment.fits, "planned_without": list(side.dropped),
            "start_advice": side.result.advice.text if side.result.advice else None}


def _figure(figure: Figure) -> dict:
    numeric = figure.unit not in ("bool",) and None not in (figure.a, figure.b)
    delta = figure.b - figure.a if numeric else None
    return {"key": figure.key, "label": figure.label, "unit": figure.unit, "a": figure.a,
            "b": figure.b, "delta": round(delta, 2) if isinstance(delta, float) else delta,
            "reasons": [{"release": r.tag, "rules": list(r.changed), "source": r.source}
                        for r in figure.reasons],
            "from": {"a": figure.sides[0], "b": figure.sides[1]} if figure.sides else None}
