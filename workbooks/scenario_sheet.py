"""The Scenario sheet: the scenario a workbook was built from, one field a row (its value as a
scenario file writes it, where it came from), and the Inputs as written, to tell an edit."""

import json
import re
from dataclasses import dataclass

from openpyxl.workbook.workbook import Workbook

from servecap.ledger.errors import SpecError

from . import page, style
from .names import cell_of, define

SHEET = "Scenario"
HEADERS = ["field", "value (YAML, as in a scenario file)", "source"]
AS_WRITTEN = "inputs_as_written"  # defined name of the hidden cell with the Inputs' snapshot
FIELD = re.compile(r"[a-z_]+\.[a-z_0-9]+")
NOTE = ("The scenario this workbook was built from (docs/scenario.md), every default spelled "
        "out: null is not given, derived again when read (source says what it took here). "
        "servecap plan --from-workbook FILE, and --scenario FILE on every command, read it "
        "back; an Inputs cell edited since wins over its field here (-v says which won). "
        "Values are YAML: quote text that reads as a number ('0.11').")
WIDTHS = (36, 30, 44)
DEFAULT = "default"  # the source of a field left at its default


@dataclass(frozen=True)
class RecordedScenario:
    """rows: (section.field, its value as YAML text, where it came from: a flag, a file,
    "default"), in a scenario file's order; each section prints as a heading above its rows."""

    rows: tuple[tuple[str, str, str], ...]


def write_scenario(wb: Workbook, record: RecordedScenario, as_written: dict) -> None:
    """The sheet, printed one page wide; the snapshot of the Inputs sits in a hidden column
    outside the print area (column E), where `as_written` is read back from ({}: a workbook
    without an Inputs sheet, such as search's)."""
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    row, section, headings = 2, None, set()
    for path, value, source in record.rows:
        head = path.split(".")[0]
        if head != section:
            style.section(ws, row, head)
            headings.add(row)
            row, section = row + 1, head
        style.text(ws, row, 1, path).font = style.LABEL_FONT if not source.startswith(DEFAULT) \
            else style.FORMULA_FONT  # what was chosen stands out from the defaults
        cell = style.text(ws, row, 2, value)
        style.as_input(cell, "@")  # what a reviewer types stays text: YAML, read as typed
        cell.alignment = style.WRAP
        style.text(ws, row, 3, source).alignment = style.TEXT_BESIDE_NUMBER  # off the border
        row += 1
    style.note(ws, row + 1, NOTE, last_col=len(HEADERS))
    for col, width in zip("ABC", WIDTHS, strict=True):
        ws.column_dimensions[col].width = width
    snapshot = ws.cell(row=1, column=5, value=json.dumps(as_written, sort_keys=True))
    snapshot.data_type = "s"
    ws.column_dimensions["E"].hidden = True
    define(wb, AS_WRITTEN, SHEET, "E1")
    page.finish(ws, areas=[f"A1:C{row + 1}"])
    page.keep_headings(ws, headings, 2, row + 1)  # after finish: the rows' heights are set


def read_scenario(wb: Workbook, where: str) -> tuple[dict[str, object], dict] | None:
    """({section.field: the value cell as stored}, the Inputs as written), or None for a
    workbook without a Scenario sheet (one written before servecap recorded it)."""
    if SHEET not in wb.sheetnames:
        return None
    fields = {}
    for path, value in wb[SHEET].iter_rows(min_row=2, max_col=2, values_only=True):
        if isinstance(path, str) and FIELD.fullmatch(path.strip()):
            fields[path.strip()] = value
    return fields, _as_written(wb, where)


def _as_written(wb: Workbook, where: str) -> dict:
    cell = cell_of(wb, AS_WRITTEN)
    if cell is None:
        raise SpecError(f"{SHEET}!{AS_WRITTEN}", None, "the hidden record of the Inputs as "
                        "written (column E) is gone; delete the Scenario sheet to plan from "
                        "the Inputs alone", where)
    try:
        found = json.loads(str(cell.value))
    except ValueError:
        found = None
    if not isinstance(found, dict) or (found and not {"flags", "deploy"} <= set(found)):
        raise SpecError(f"{SHEET}!{AS_WRITTEN}", cell.value, "servecap's JSON record of the "
                        "Inputs as written; restore it, or delete the Scenario sheet to plan "
                        "from the Inputs alone", where)
    return found
