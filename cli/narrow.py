"""Tables at the terminal's width: a number is never cut; when even wrapped words do not fit,
named columns are dropped, least needed first, and a note says which."""

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table


def print_table(console: Console, table: Table, drop: tuple[str, ...] = (),
                wrap: tuple[str, ...] = ()) -> list[str]:
    """Print `table` whole at console.width. A right-justified (number) or no-wrap column keeps
    its widest cell on one line, unless its header is in `wrap` (a figure with its interval:
    it keeps its longest word); other columns keep their longest word. Columns whose header
    is in `drop` go, in that order, until the table fits; then, if it still does not, no-wrap
    text columns wrap at words. Returns the headers dropped."""
    words = {" ".join(header.split()) for header in wrap}
    for column in table.columns:
        column.min_width = _least(console, column, " ".join(str(column.header).split()) in words)
    dropped = []
    for header in drop:
        if minimum_width(table) <= console.width:
            break
        if _remove(table, header):
            dropped.append(header)
    for column in table.columns:
        if minimum_width(table) > console.width and column.no_wrap \
                and column.justify != "right":
            column.no_wrap, column.min_width = False, None
            column.min_width = _least(console, column)
    _share(console, table)
    console.print(table)
    if dropped:
        names = ", ".join(" ".join(h.split()) for h in dropped)
        console.print(f"left out at {console.width} columns: {names} (see --json)",
                      style="dim", highlight=False)
    return dropped


def minimum_width(table: Table) -> int:
    """The narrowest the table prints with every column at its min_width."""
    padding = sum(table._get_padding_width(i) for i in range(len(table.columns)))
    return sum(c.min_width or 1 for c in table.columns) + padding + table._extra_width


def _share(console: Console, table: Table) -> None:
    """Fix each column's width when the table must shrink: the column with the most room above
    its narrowest gives a character at a time (rich's own shrinking can cut a number)."""
    options = console.options.update_width(10_000)
    room = console.width - (minimum_width(table) - sum(c.min_width or 1 for c in table.columns))
    widths = [max([Measurement.get(console, options, cell).maximum
                   for cell in (c.header, *c.cells)] + [c.min_width or 1]) for c in table.columns]
    if sum(widths) <= room:
        return
    least = [c.min_width or 1 for c in table.columns]
    for _ in range(sum(widths) - room):
        i = max(range(len(widths)), key=lambda k: widths[k] - least[k])
        if widths[i] <= least[i]:
            break
        widths[i] -= 1
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width


def _least(console: Console, column: Column, wraps: bool = False) -> int:
    """A column's narrowest width that cuts nothing: whole cells, or whole words (a number
    column only when it `wraps`: a figure and its interval, '2,254.3 (2,175.9-2,360.1)', may
    wrap between them, never inside a number)."""
    options = console.options.update_width(10_000)
    whole = column.no_wrap or (column.justify == "right" and not wraps)
    widths = [Measurement.get(console, options, column.header).minimum]
    for cell in column.cells:
        measured = Measurement.get(console, options, cell)
        widths.append(measured.maximum if whole else measured.minimum)
    return max(widths + [column.min_width or 1])


def _remove(table: Table, header: str) -> bool:
    for index, column in enumerate(table.columns):
        if " ".join(str(column.header).split()) == " ".join(header.split()):
            del table.columns[index]
            for i, kept in enumerate(table.columns):
                kept._index = i
            return True
    return False
