"""How a capacity workbook looks: input vs formula styles, number formats with units, widths."""

import re

from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

# Number formats carry the unit, so a reviewer never has to guess what a cell counts.
BYTES = '#,##0" B"'
GIB = '#,##0.00" GiB"'
TOKENS = '#,##0" tokens"'
REQUESTS = '#,##0" requests"'
BITS = '#,##0" bits"'
COUNT = "#,##0"
PARAMS = '#,##0" params"'
LAYERS = '#,##0" layers"'
HEADS = '#,##0" heads"'
ELEMENTS = '#,##0" elements"'
BLOCKS = '#,##0" blocks"'
MS = '#,##0.0" ms"'
TOKENS_PER_S = '#,##0.0" tokens/s"'
FRACTION = "0.00%"

# Inputs: blue on pale yellow (the spreadsheet convention for "type here"); formulas: black.
INPUT_FONT = Font(color="1F4E9E", bold=True)
INPUT_FILL = PatternFill("solid", start_color="FFF6CC")
FORMULA_FONT = Font(color="000000")
HEADER_FONT = Font(bold=True, color="FFFFFF")
HEADER_FILL = PatternFill("solid", start_color="3A4A5C")
SECTION_FONT = Font(bold=True, italic=True)
NOTE_FONT = Font(italic=True, color="555555")
_THIN = Side(style="thin", color="B7B7B7")
INPUT_BORDER = Border(left=_THIN, right=_THIN, top=_THIN, bottom=_THIN)
WRAP = Alignment(wrap_text=True, vertical="top")


def header(ws: Worksheet, titles: list[str], row: int = 1) -> None:
    """A bold header row; the sheet scrolls under it (frozen)."""
    for col, title in enumerate(titles, start=1):
        cell = ws.cell(row=row, column=col, value=title)
        cell.font, cell.fill = HEADER_FONT, HEADER_FILL
        cell.alignment = Alignment(vertical="center", wrap_text=False)
    ws.freeze_panes = ws.cell(row=row + 1, column=1)


def as_input(cell, number_format: str | None = None) -> None:
    """Mark a cell as something a reviewer is meant to change."""
    cell.font, cell.fill, cell.border = INPUT_FONT, INPUT_FILL, INPUT_BORDER
    if number_format:
        cell.number_format = number_format


def as_formula(cell, number_format: str | None = None) -> None:
    cell.font = FORMULA_FONT
    if number_format:
        cell.number_format = number_format


def text(ws: Worksheet, row: int, column: int, value: object):
    """A cell that holds text from an input file (a model's source, a path, a name): text even
    when it starts with '=', so '=HYPERLINK(...)' in a model YAML never becomes a formula."""
    cell = ws.cell(row=row, column=column, value=value)
    if isinstance(value, str) and cell.data_type == "f":
        cell.data_type = "s"
    return cell


def section(ws: Worksheet, row: int, title: str) -> None:
    ws.cell(row=row, column=1, value=title).font = SECTION_FONT


def note(ws: Worksheet, row: int, text: str) -> None:
    """A sentence under a table; it may overflow to the right, so it does not set widths."""
    ws.cell(row=row, column=1, value=text).font = NOTE_FONT


# The widest text a formula of each format shows when servecap does not know its value.
_FORMULA_WIDTH = {BYTES: len("-1,099,511,627,776 B"), GIB: len("-99,999.00 GiB"),
                  TOKENS: len("99,999,999 tokens"), REQUESTS: len("999,999,999 requests")}
_SUFFIX = re.compile(r'"([^"]*)"')


def shown(value, number_format: str | None) -> str:
    """The text a spreadsheet shows for `value` under one of the formats above (en-US)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    fmt = number_format or "General"
    suffix = "".join(_SUFFIX.findall(fmt))
    if fmt.endswith("%"):
        return f"{value:.2%}"
    places = len(fmt.split(".")[1].split('"')[0].rstrip("%")) if "." in fmt.split('"')[0] else 0
    if "#,##0" in fmt:
        return f"{value:,.{places}f}{suffix}"
    if fmt == "General":
        return f"{value:.10g}"
    return f"{value:.{places}f}{suffix}"


def fit_columns(ws: Worksheet, minimum: int = 10, maximum: int = 70) -> None:
    """Widths from the longest text each column shows: numbers as their format renders them
    (a formula by its cached value, else the widest its format shows), plus a margin, so no
    number prints as ###; section titles and notes (italic) overflow instead."""
    cached = ws.parent.__dict__.get("_servecap_cached", {})
    widths: dict[int, int] = {}
    for row in ws.iter_rows():
        for cell in row:
            if cell.value is None or cell.font.i:
                continue
            value = cell.value
            if isinstance(value, str) and value.startswith("="):
                value = cached.get((ws.title, cell.coordinate))
                size = (len(shown(value, cell.number_format)) if value is not None
                        else _FORMULA_WIDTH.get(cell.number_format, 18))
            else:
                size = len(shown(value, cell.number_format))
            widths[cell.column] = max(widths.get(cell.column, minimum), min(size + 3, maximum))
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width


def print_setup(ws: Worksheet, one_page: bool = False) -> None:
    """Landscape, one page wide (one page in all with one_page), the header row on every
    page, and the used range as the print area."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 1 if one_page else 0
    ws.print_title_rows = "1:1"
    ws.print_area = ws.dimensions
    ws.print_options.gridLines = False


def fit_rows(ws: Worksheet, first_row: int = 2) -> None:
    """Row heights for wrapped text (a spreadsheet does not grow rows it loads from a file):
    15 points a line, lines from each wrapped cell's text length over its column width."""
    cached = ws.parent.__dict__.get("_servecap_cached", {})
    for row in ws.iter_rows(min_row=first_row):
        lines = 1
        for cell in row:
            if cell.value is None or not cell.alignment.wrap_text:
                continue
            text = cached.get((ws.title, cell.coordinate), cell.value)
            width = ws.column_dimensions[get_column_letter(cell.column)].width or 10
            lines = max(lines, -(-len(str(text)) // max(int(width) - 2, 1)))
        if lines > 1:
            ws.row_dimensions[row[0].row].height = 15 * lines
