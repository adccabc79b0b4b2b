"""The Diff sheet (servecap diff --xlsx): each figure under A and B as values, what the sheet
computes (B - A, the change in GiB and in %, each side's committed sum) as live formulas, and
each change's reason with the release's source cited. It takes scenario.diff's Comparison
(its figures' fields: key, label, unit, a, b, reasons, sides), which this floor does not
import."""

from openpyxl import Workbook
from openpyxl.utils import get_column_letter

from . import page, style
from .cached import remember
from .names import define
from .scenario_sheet import RecordedScenario, write_scenario

SHEET = "Diff"
HEADERS = ["key", "figure", "A", "B", "B - A", "B - A [GiB]", "B / A - 1", "why"]
FORMATS = {"bytes": style.BYTES, "blocks": style.BLOCKS, "tokens": style.TOKENS,
           "requests": style.REQUESTS, "x": '0.00"x"', "bool": style.BOOL}
WHY_WIDTH = 48


def diff_workbook(result, record: RecordedScenario | None = None) -> Workbook:
    """The Diff sheet, and the scenario it compared (side A's) on the Scenario sheet."""
    wb = Workbook()
    wb.remove(wb.active)
    style.use_default_font(wb)
    write_diff(wb, result)
    if record is not None:
        write_scenario(wb, record, {})
    wb.calculation.fullCalcOnLoad = True
    return wb


def write_diff(wb: Workbook, result) -> None:
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    row = _sides(wb, ws, result, 2)
    first = row + 1
    row = _section(ws, row, "ledger lines (the binding rank)")
    for figure in result.lines:
        row = _figure(wb, ws, row, figure)
    row = _committed(wb, ws, row, first, result)
    row = _section(ws, row + 1, "the engine's pool")
    for figure in result.pool:
        row = _figure(wb, ws, row, figure)
    row = _section(ws, row + 1, "outcome")
    for figure in result.outcome:
        row = _figure(wb, ws, row, figure)
    _notes(ws, row + 1, result)
    style.fit_columns(ws)
    ws.column_dimensions["H"].width = WHY_WIDTH
    page.finish(ws, areas=[f"B1:H{ws.max_row}"])


def _sides(wb, ws, result, row: int) -> int:
    """Which engine and release each column is (defined names diff_a_engine, diff_b_engine)."""
    plan = result.a.result.deployment.plan
    facts = (("diff_model", "model", plan.model),
             ("diff_device", "device", plan.serve.device_label or f"{plan.serve.device_bytes:,} B"),
             ("diff_a_engine", "A", result.a.label), ("diff_b_engine", "B", result.b.label))
    for name, label, value in facts:
        ws.cell(row=row, column=1, value=name)
        ws.cell(row=row, column=2, value=label).font = style.LABEL_FONT
        style.text(ws, row, 3, value)
        ws.merge_cells(start_row=row, start_column=3, end_row=row, end_column=8)
        define(wb, name, SHEET, f"C{row}")
        row += 1
    return row


def _section(ws, row: int, title: str) -> int:
    style.section(ws, row, title, column=2)
    return row + 1


def _figure(wb, ws, row: int, figure) -> int:
    fmt = FORMATS[figure.unit]
    ws.cell(row=row, column=1, value=figure.key)
    ws.cell(row=row, column=2, value=figure.label)
    for column, value in ((3, figure.a), (4, figure.b)):
        style.as_input(ws.cell(row=row, column=column, value=value), fmt)
    numeric = figure.unit != "bool" and None not in (figure.a, figure.b)
    if numeric:
        _formula(ws, row, 5, f"=D{row}-C{row}", fmt, figure.b - figure.a)
        if figure.unit == "bytes":
            _formula(ws, row, 6, f"=(D{row}-C{row})/2^30", style.GIB,
                     (figure.b - figure.a) / 2**30)
        _formula(ws, row, 7, f'=IF(C{row}=0,"",D{row}/C{row}-1)', style.FRACTION,
                 figure.b / figure.a - 1 if figure.a else "")
    else:
        # a yes/no (or a side without the figure) has no difference to subtract: it says
        # whether it changed, blank when not, as the CLI's B - A column does
        _formula(ws, row, 5, f'=IF(D{row}=C{row},"","changed")', None,
                 "changed" if figure.a != figure.b else "")
    why = _why(figure)
    if why:
        style.text(ws, row, 8, why).alignment = style.WRAP
    if figure.key in NAMED:
        define(wb, f"diff_a_{NAMED[figure.key]}", SHEET, f"C{row}")
        define(wb, f"diff_b_{NAMED[figure.key]}", SHEET, f"D{row}")
    return row + 1


NAMED = {"kv_pool_bytes": "pool_bytes", "num_gpu_blocks": "gpu_blocks",
         "kv_cache_tokens": "kv_cache_tokens", "max_concurrency": "max_concurrency",
         "ceiling": "ceiling_requests", "starts": "starts", "fits": "fits"}


def _formula(ws, row: int, column: int, formula: str, fmt: str, value) -> None:
    cell = ws.cell(row=row, column=column, value=formula)
    style.as_formula(cell, fmt)
    remember(ws, cell.coordinate, value)


def _committed(wb, ws, row: int, first: int, result) -> int:
    """Each side's committed bytes: the sum of its lines above, a formula."""
    plans = (result.a.result.deployment.plan, result.b.result.deployment.plan)
    ws.cell(row=row, column=1, value="committed")
    ws.cell(row=row, column=2, value="committed + reserved").font = style.LABEL_FONT
    for column, plan in ((3, plans[0]), (4, plans[1])):
        letter = get_column_letter(column)
        _formula(ws, row, column, f"=SUM({letter}{first}:{letter}{row - 1})", style.BYTES,
                 plan.committed_bytes)
    _formula(ws, row, 5, f"=D{row}-C{row}", style.BYTES,
             plans[1].committed_bytes - plans[0].committed_bytes)
    _formula(ws, row, 6, f"=(D{row}-C{row})/2^30", style.GIB,
             (plans[1].committed_bytes - plans[0].committed_bytes) / 2**30)
    define(wb, "diff_a_committed_bytes", SHEET, f"C{row}")
    define(wb, "diff_b_committed_bytes", SHEET, f"D{row}")
    return row + 1


def _why(figure) -> str:
    if not figure.changed:
        return ""
    if figure.reasons:
        return "; ".join(reason.text() for reason in figure.reasons)
    if figure.sides:
        return f"A: {figure.sides[0]}; B: {figure.sides[1]}"
    return ""


def _notes(ws, row: int, result) -> int:
    """Each release a reason names, with the vLLM source its row cites, under the table."""
    cited: dict[str, str] = {}
    for figure in result.lines + result.pool + result.outcome:
        for reason in figure.reasons:
            cited.setdefault(reason.tag, reason.source)
    for tag, source in cited.items():
        style.note(ws, row, f"{tag}: {source}", last_col=8, column=2)
        ws.row_dimensions[row].height = 13 * (len(source) // 110 + 2)
        row += 1
    for side in (result.a, result.b):
        if side.dropped:
            style.note(ws, row, f"{side.engine}: planned without {', '.join(side.dropped)} "
                       "(another engine's)", last_col=8, column=2)
            row += 1
    return row
