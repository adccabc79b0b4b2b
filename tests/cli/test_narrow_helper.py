"""print_table keeps every number whole at any width: a column is dropped, and named, before
one of its numbers is cut."""

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from servecap.cli.narrow import print_table

NUMBERS = st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda v: f"{v:,.2f}")


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(NUMBERS, min_size=6, max_size=6), min_size=1, max_size=5),
       width=st.integers(min_value=50, max_value=200))
def test_numbers_stay_whole_or_their_column_is_named(rows, width) -> None:
    out = io.StringIO()
    console = Console(file=out, width=width)
    headers = ["name"] + [f"col {i} req/s" for i in range(1, 6)]
    table = Table()
    for header in headers:
        table.add_column(header, justify="left" if header == "name" else "right")
    for row in rows:
        table.add_row(*row)
    dropped = print_table(console, table, drop=tuple(headers[1:]))
    text = out.getvalue()
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines() if line[:1] in "┏┃┡│└")
    kept = [i for i, h in enumerate(headers) if h not in dropped]
    for row in rows:
        assert all(row[i] in text for i in kept)
    if dropped:
        assert f"left out at {width} columns: {', '.join(dropped)}" in " ".join(text.split())
    else:
        assert "left out" not in text


def test_a_wrapping_text_column_keeps_its_words() -> None:
    out = io.StringIO()
    table = Table()
    table.add_column("ledger line")
    table.add_column("predicted", justify="right")
    table.add_row("memory ceiling (requests)", "417.25 KiB")
    print_table(Console(file=out, width=28), table)
    text = out.getvalue()
    assert "417.25 KiB" in text and "(requests)" in text and "…" not in text


def test_a_no_wrap_label_wraps_before_a_number_is_cut() -> None:
    out = io.StringIO()
    table = Table()
    table.add_column("ledger line", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_row("weight layout in vLLM (beyond the checkpoint)", "150,109,486,517")
    print_table(Console(file=out, width=40), table)
    text = out.getvalue()
    assert "150,109,486,517" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 40
