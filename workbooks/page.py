"""How a sheet prints: landscape A4, one page wide, the header row on every page, a print area
that holds every chart, rows as tall as their wrapped text, labels and values aligned alike."""

from openpyxl.styles import Alignment
from openpyxl.utils import get_column_letter, range_boundaries
from openpyxl.worksheet.page import PageMargins
from openpyxl.worksheet.pagebreak import Break
from openpyxl.worksheet.worksheet import Worksheet

from .style import HEADER_FILL, booleans

# Inches; narrow sides keep the scale that fits a sheet to one page wide high.
MARGINS = PageMargins(left=0.4, right=0.4, top=0.5, bottom=0.6, header=0.25, footer=0.3)
FOOTER = "&A, page &P of &N"  # sheet name, page number, pages
WIDE_SCALE_PERCENT = 75
LINE_POINTS = 13  # one line of 10-point text


def finish(ws: Worksheet, one_page: bool = False, areas: list[str] | None = None,
           title_rows: str | None = "1:1", pages_wide: int = 1) -> None:
    """Row heights, top alignment and the page setup; `areas` defaults to every used cell and
    every chart. Call once the sheet's cells and widths are final."""
    fit_rows(ws)
    align_top(ws)
    align_headers(ws)
    booleans(ws)
    print_setup(ws, one_page, areas, title_rows, pages_wide)


def print_setup(ws: Worksheet, one_page: bool = False, areas: list[str] | None = None,
                title_rows: str | None = "1:1", pages_wide: int = 1) -> None:
    """Landscape, one page wide (one page in all with one_page; with pages_wide > 1 as many
    pages wide as it takes at WIDE_SCALE_PERCENT), the header rows on every page, the print
    area, the sheet's name and page number in the footer."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    if pages_wide > 1:  # a fixed scale: fitting to N pages wide lets a reader pick any scale
        ws.sheet_properties.pageSetUpPr.fitToPage = False
        ws.page_setup.scale = WIDE_SCALE_PERCENT
    else:
        ws.sheet_properties.pageSetUpPr.fitToPage = True
        ws.page_setup.fitToWidth = 1
        ws.page_setup.fitToHeight = 1 if one_page else 0
    ws.page_margins = MARGINS
    ws.oddFooter.center.text = FOOTER
    if title_rows:
        ws.print_title_rows = title_rows
    ws.print_area = areas or [used_range(ws)]
    ws.print_options.gridLines = False


# A4 landscape is 595.28 points tall; the print body is that less the top and bottom margins,
# in Excel and LibreOffice alike (the footer prints inside the bottom margin).
A4_LANDSCAPE_POINTS = 595.28
BODY_POINTS = A4_LANDSCAPE_POINTS - 72 * (MARGINS.top + MARGINS.bottom)
SLACK_POINTS = 3  # rounding: a page is filled to a few points short of its body


def keep_headings(ws: Worksheet, headings: set[int], first_row: int, last_row: int,
                  keep: int = 2) -> None:
    """Page breaks for a tall list of sections (the sheet at 100 %, its first row repeated
    on every page): a page ends where the next row would not fit, or before a heading that
    would not fit with the first `keep` rows of its section, so no heading ends a page with
    nothing under it. Every break is explicit, at or above where the page would end anyway."""
    room = BODY_POINTS - SLACK_POINTS - row_points(ws, 1)
    used = 0.0
    for row in range(first_row, last_row + 1):
        height = row_points(ws, row)
        need = height
        if row in headings:
            below = range(row + 1, min(row + keep, last_row) + 1)
            need += sum(row_points(ws, r) for r in below)
        if used and used + need > room:
            break_before(ws, row)
            used = 0.0
        used += height


def row_points(ws: Worksheet, row: int) -> float:
    """A row's printed height: its own, else the sheet's default (15 points as written)."""
    return ws.row_dimensions[row].height or ws.sheet_format.defaultRowHeight or 15.0


def break_before(ws: Worksheet, row: int) -> None:
    """Start a new page at `row` (a chart, a second table): never cut across it."""
    ws.row_breaks.append(Break(id=row - 1))


def used_range(ws: Worksheet, max_col: int | None = None, first_col: int = 1) -> str:
    """A1 (first_col) to the last used cell or the far corner of the last chart, whichever
    is further; with max_col, cells right of that column (a chart's own data) are left out."""
    _, _, last_col, max_row = range_boundaries(ws.dimensions)
    max_col = last_col if max_col is None else max_col
    for chart in ws._charts:
        to = getattr(chart.anchor, "to", None)
        if to is not None:  # a two-cell anchor's end marker: 0-based, the cell after the chart
            max_col, max_row = max(max_col, to.col), max(max_row, to.row)
    return f"{get_column_letter(first_col)}1:{get_column_letter(max_col)}{max_row}"


def fit_rows(ws: Worksheet, first_row: int = 1) -> None:
    """Row heights for wrapped text (a spreadsheet does not grow rows it loads from a file):
    13 points a line, the lines a greedy word wrap of each wrapped cell gives at its width."""
    cached = ws.parent.__dict__.get("_servecap_cached", {})
    spans = _merged_widths(ws)
    for row in ws.iter_rows(min_row=first_row):
        lines = 1
        for cell in row:
            if cell.value is None or not cell.alignment.wrap_text:
                continue
            text = str(cached.get((ws.title, cell.coordinate), cell.value))
            width = spans.get(cell.coordinate) or column_width(ws, cell.column)
            lines = max(lines, wrapped_lines(text, width, int(cell.alignment.indent or 0),
                                             bool(cell.font.b)))
        if lines > 1:
            ws.row_dimensions[row[0].row].height = LINE_POINTS * lines


def wrapped_lines(text: str, width: float, indent: int = 0, bold: bool = False) -> int:
    """Lines a greedy word wrap of `text` takes in a column `width` characters wide (a word
    longer than a line breaks anywhere)."""
    room = width * PIXELS_PER_WIDTH / DIGIT_PIXELS - PADDING - indent * INDENT
    room = max(room / (BOLD if bold else 1.0), 1.0)
    total = 0
    for paragraph in text.split("\n"):
        lines, used = 1, 0.0
        for word in paragraph.split():
            size = units(word)
            if used and used + units(" ") + size > room:
                lines, used = lines + 1, 0.0
            if used:
                used += units(" ") + size
                continue
            while size > room:  # a hash, a path: broken wherever the line ends
                lines, size = lines + 1, size - room
            used = size
        total += lines
    return total


# A column of width w is 7w pixels; Arial 10's digit is 7.4 (Liberation Sans, 96 dpi); a cell
# pads its text by about a digit, an indent level is about 1.4 digits.
PIXELS_PER_WIDTH, DIGIT_PIXELS, PADDING, INDENT = 7.0, 7.41, 1.0, 1.4
BOLD = 1.1  # bold letters are a tenth wider
NARROW = frozenset(" ,.;:'!|()[]{}/-\\")


def units(text: str) -> float:
    """Width of Arial text in digits, a little generous: digits one, capitals 1.25, lower
    case 0.9, spaces and punctuation 0.55 (measured on Liberation Sans)."""
    return 1.03 * sum(1.0 if c.isdigit() else 1.25 if c.isupper() else 0.55 if c in NARROW
                      else 0.9 for c in text)


def column_width(ws: Worksheet, column: int) -> float:
    return ws.column_dimensions[get_column_letter(column)].width or 8.43


def _merged_widths(ws: Worksheet) -> dict[str, float]:
    """The width of each merged range, keyed by its first cell."""
    out = {}
    for merged in ws.merged_cells.ranges:
        out[merged.start_cell.coordinate] = sum(
            column_width(ws, col) for col in range(merged.min_col, merged.max_col + 1))
    return out


def align_headers(ws: Worksheet) -> None:
    """A header over a column of numbers is right-aligned, as its numbers are; a column of
    text right of a column of numbers is indented, header and text, so the two never touch."""
    for row in ws.iter_rows():
        numbers = False
        for cell in row:
            if cell.fill != HEADER_FILL:
                numbers = False
                continue
            now = _numbers_below(ws, cell)
            old = cell.alignment
            # indented a character from the side it is aligned to: two headers never touch
            cell.alignment = Alignment(horizontal="right" if now else "left", indent=1,
                                       vertical=old.vertical, wrap_text=old.wrap_text)
            if numbers and not now:
                _indent_column(ws, cell)
            numbers = now


def _indent_column(ws: Worksheet, header) -> None:
    for (cell,) in ws.iter_rows(min_row=header.row + 1, min_col=header.column,
                                max_col=header.column):
        old = cell.alignment
        if cell.value is None or old.horizontal not in (None, "general", "left") or \
                isinstance(cell.value, int | float):
            continue
        cell.alignment = Alignment(horizontal="left", indent=max(old.indent, 1),
                                   vertical=old.vertical, wrap_text=old.wrap_text)


def _numbers_below(ws: Worksheet, cell) -> bool:
    """Whether the first value under a header (within three rows) is a number."""
    below = next((ws.cell(row=cell.row + i, column=cell.column) for i in (1, 2, 3)
                  if ws.cell(row=cell.row + i, column=cell.column).value is not None), None)
    if below is None:
        return False
    value = below.value
    if isinstance(value, bool) or (below.data_type == "f" and below.number_format == "General"):
        return False
    return isinstance(value, int | float) or below.data_type == "f"


def align_top(ws: Worksheet) -> None:
    """Every cell top-aligned: in a row grown for wrapped text a label and its value start on
    the same line (a bottom-aligned label reads as belonging to the row below)."""
    for row in ws.iter_rows():
        for cell in row:
            if cell.value is None:
                continue
            old = cell.alignment
            if old.vertical != "top":
                cell.alignment = Alignment(horizontal=old.horizontal, vertical="top",
                                           wrap_text=old.wrap_text, indent=old.indent)
