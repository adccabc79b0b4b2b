"""How a capacity workbook looks: input vs formula styles, number formats with units, widths."""

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


def fit_columns(ws: Worksheet, minimum: int = 10, maximum: int = 70) -> None:
    """Widths from the longest text or number shown in each column (formulas count as 18);
    section titles and notes (italic) overflow instead of widening their column."""
    widths: dict[int, int] = {}
    for row in ws.iter_rows():
        for cell in row:
            if cell.value is None or cell.font.i:
                continue
            text = str(cell.value)
            size = 18 if text.startswith("=") else len(text) + 2
            widths[cell.column] = max(widths.get(cell.column, minimum), min(size, maximum))
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width
