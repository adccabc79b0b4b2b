"""How a capacity workbook looks: input vs formula styles, number formats with units, widths."""

import re

from openpyxl.formatting.rule import Rule
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.styles.differential import DifferentialStyle
from openpyxl.styles.numbers import NumberFormat
from openpyxl.utils import get_column_letter
from openpyxl.utils.indexed_list import IndexedList
from openpyxl.worksheet.worksheet import Worksheet

# Number formats carry the unit, so a reviewer never has to guess what a cell counts.


def counted(unit: str) -> str:
    """A whole count with its unit, singular at exactly 1 and plural otherwise ('1 request',
    '0 requests', '-3 requests'), decided by the cell's value, so it stays right after any
    recalculation. The negative section writes its own minus sign: a section under a
    condition shows the magnitude, in Excel and LibreOffice alike."""
    return f'[=1]0" {unit}";[<0]-#,##0" {unit}s";#,##0" {unit}s"'


BYTES = '#,##0" B"'
GIB = '#,##0.00" GiB"'
TOKENS = counted("token")
REQUESTS = counted("request")
BITS = counted("bit")
COUNT = "#,##0"
PARAMS = counted("param")
LAYERS = counted("layer")
HEADS = counted("head")
ELEMENTS = counted("element")
BLOCKS = counted("block")
MS = '#,##0.0" ms"'
TOKENS_PER_S = '#,##0.0" tokens/s"'
FRACTION = "0.00%"
RATE = '#,##0.00" req/s"'
# TRUE/FALSE in print: LibreOffice shows a boolean cell as 1/0 under General, and under this
# number format it saves the value as a number. So a cell given BOOL keeps General and gets it
# from a conditional format that always applies (booleans(): display only, the type stays).
BOOL = '"TRUE";"TRUE";"FALSE"'
_BOOLEANS = "_servecap_booleans"

# One typeface and size on every cell, the workbook's default too (a font without a name prints
# in the reader's default, often a serif). Arial, because its metrics are the same wherever the
# workbook opens: Excel's Arial, LibreOffice's Liberation Sans (installed with it); Calibri
# becomes a wider face where it is missing, and column widths and the print scale move.
FONT_NAME, FONT_SIZE = "Arial", 10


def font(**kwargs) -> Font:
    return Font(name=FONT_NAME, size=FONT_SIZE, **kwargs)


def use_default_font(wb) -> None:
    """The workbook's default font (its unit of column width) is the cells' font."""
    wb._fonts = IndexedList([font()])
    wb._named_styles["Normal"].font = font()


# Inputs: blue on pale yellow (the spreadsheet convention for "type here"); formulas: black.
INPUT_FONT = font(color="1F4E9E", bold=True)
INPUT_FILL = PatternFill("solid", start_color="FFF6CC")
FORMULA_FONT = font(color="000000")
LABEL_FONT = font(bold=True)
HEADER_FONT = font(bold=True, color="FFFFFF")
HEADER_FILL = PatternFill("solid", start_color="3A4A5C")
SECTION_FONT = font(bold=True, italic=True)
NOTE_FONT = font(italic=True, color="555555")
_THIN = Side(style="thin", color="B7B7B7")
INPUT_BORDER = Border(left=_THIN, right=_THIN, top=_THIN, bottom=_THIN)
WRAP = Alignment(wrap_text=True, vertical="top")
HEADER_ALIGN = Alignment(wrap_text=True, vertical="top")
# Text in the column right of a right-aligned number: indented, so the two never touch.
TEXT_BESIDE_NUMBER = Alignment(horizontal="left", indent=1, wrap_text=True, vertical="top")


def header(ws: Worksheet, titles: list[str], row: int = 1, first_col: int = 1) -> None:
    """A bold header row; the sheet scrolls under it (frozen). Titles wrap at their spaces, so
    a column is as wide as its numbers need, not as its title."""
    for col, title in enumerate(titles, start=first_col):
        header_cell(ws.cell(row=row, column=col, value=title))
    ws.freeze_panes = ws.cell(row=row + 1, column=1)


def header_cell(cell) -> None:
    cell.font, cell.fill, cell.alignment = HEADER_FONT, HEADER_FILL, HEADER_ALIGN


def as_input(cell, number_format: str | None = None) -> None:
    """Mark a cell as something a reviewer is meant to change."""
    cell.font, cell.fill, cell.border = INPUT_FONT, INPUT_FILL, INPUT_BORDER
    _number_format(cell, number_format)


def as_formula(cell, number_format: str | None = None) -> None:
    cell.font = FORMULA_FONT
    _number_format(cell, number_format)


def _number_format(cell, number_format: str | None) -> None:
    if number_format == BOOL:
        cell.parent.__dict__.setdefault(_BOOLEANS, []).append(cell.coordinate)
    elif number_format:
        cell.number_format = number_format


def booleans(ws: Worksheet) -> None:
    """TRUE/FALSE on the cells given BOOL: a conditional number format, always on."""
    cells = ws.__dict__.get(_BOOLEANS)
    if cells:
        dxf = DifferentialStyle(numFmt=NumberFormat(numFmtId=BOOL_FORMAT_ID, formatCode=BOOL))
        ws.conditional_formatting.add(" ".join(cells), Rule(type="expression",
                                                            formula=["TRUE"], dxf=dxf))


BOOL_FORMAT_ID = 300  # a custom number format's id, past the built-in ones (0-163)


def text(ws: Worksheet, row: int, column: int, value: object):
    """A cell that holds text from an input file (a model's source, a path, a name): text even
    when it starts with '=', so '=HYPERLINK(...)' in a model YAML never becomes a formula."""
    cell = ws.cell(row=row, column=column, value=value)
    if isinstance(value, str) and cell.data_type == "f":
        cell.data_type = "s"
    return cell


def section(ws: Worksheet, row: int, title: str, column: int = 1) -> None:
    ws.cell(row=row, column=column, value=title).font = SECTION_FONT


def note(ws: Worksheet, row: int, text: str, last_col: int | None = None,
         column: int = 1) -> None:
    """A sentence under a table. With last_col it wraps inside columns column..last_col
    (merged), so it never runs past the print area; else it overflows to the right."""
    cell = ws.cell(row=row, column=column, value=text)
    cell.font = NOTE_FONT
    if last_col is not None and last_col > column:
        ws.merge_cells(start_row=row, start_column=column, end_row=row, end_column=last_col)
        cell.alignment = WRAP


# The widest text a formula of each format shows when servecap does not know its value.
_FORMULA_WIDTH = {BYTES: len("-1,099,511,627,776 B"), GIB: len("-99,999.00 GiB"),
                  TOKENS: len("99,999,999 tokens"), REQUESTS: len("999,999,999 requests")}
_LITERALS = re.compile(r'((?:"[^"]*")*)(.*?)((?:"[^"]*")*)')  # "text" before, digits, "text"


def shown(value, number_format: str | None) -> str:
    """The text a spreadsheet shows for `value` under one of the formats above (en-US); of a
    format with sections (positive;negative;zero), the value's own."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value).upper() if isinstance(value, bool) else str(value)
    fmt = number_format or "General"
    sections = fmt.split(";")
    if _CONDITION.match(fmt):  # counted()'s: the first section whose condition holds
        section = next(s for s in sections if _holds(_CONDITION.match(s), value))
        body = _CONDITION.sub("", section, count=1)
        prefix = body[:len(body) - len(body.lstrip("+-"))]
        return prefix + shown(abs(value), body[len(prefix):])
    if len(sections) > 1:  # a section's own sign (+, -) is a literal before its digits
        index = 0 if value > 0 else 1 if value < 0 else 2
        section = sections[index] if index < len(sections) else sections[0]
        prefix = section[:len(section) - len(section.lstrip("+-"))]
        return prefix + shown(abs(value), section[len(prefix):])
    before, body, after = _LITERALS.fullmatch(fmt).groups()
    text = _digits(value, body)
    return before.replace('"', "") + text + after.replace('"', "")


_CONDITION = re.compile(r"\[(=|<>|<=|>=|<|>)(-?[0-9.]+)\]")


def _holds(condition, value) -> bool:
    """Whether a section's [op number] admits value; a section without one admits any."""
    if condition is None:
        return True
    op, bound = condition.group(1), float(condition.group(2))
    return {"=": value == bound, "<>": value != bound, "<": value < bound, ">": value > bound,
            "<=": value <= bound, ">=": value >= bound}[op]


def _digits(value: float, body: str) -> str:
    if body.endswith("%"):
        return f"{value:.{_places(body)}%}"
    if "#,##0" in body:
        return f"{value:,.{_places(body)}f}"
    if body in ("General", ""):
        return f"{value:.10g}"
    return f"{value:.{_places(body)}f}"


def _places(body: str) -> int:
    return len(body.split(".")[1].rstrip("%")) if "." in body else 0


def fit_columns(ws: Worksheet, minimum: int = 10, maximum: int = 70) -> None:
    """Widths from the longest text each column shows: numbers as their format renders them
    (a formula by its cached value, else the widest its format shows), plus a margin, so no
    number prints as ###; a wrapping cell (a header) needs only its longest word; section
    titles and notes (italic) overflow instead; merged text spans its columns and sets none."""
    cached = ws.parent.__dict__.get("_servecap_cached", {})
    merged = {r.start_cell.coordinate for r in ws.merged_cells.ranges}
    widths: dict[int, int] = {}
    for row in ws.iter_rows():
        for cell in row:
            if cell.value is None or cell.font.i or cell.coordinate in merged:
                continue
            size = _text_width(cell, cached.get((ws.title, cell.coordinate)))
            widths[cell.column] = max(widths.get(cell.column, minimum), min(size + 3, maximum))
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width


def _text_width(cell, cached) -> int:
    value = cell.value
    if isinstance(value, str) and value.startswith("=") and cell.data_type == "f":
        if cached is None:
            return _FORMULA_WIDTH.get(cell.number_format, 18)
        value = cached
    text = shown(value, cell.number_format)
    if cell.alignment.wrap_text:
        return max((len(word) for word in text.split()), default=0)
    return len(text)
