"""The Envelope's deployment columns: the deployment the Ranks sheet holds (its tp x pp x dp,
its engine and that engine's budget) planned again, as `servecap plan` plans it, at each row's
device, context and KV dtype. Values servecap computed, not formulas: an engine's budget is
not a spreadsheet formula, so the headers say where each value comes from."""

from collections.abc import Callable
from dataclasses import dataclass

from openpyxl.utils import get_column_letter

from servecap.ledger.devices import from_label, resolve_device
from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Deployment

from . import style
from .source import WorkbookSource

FROM = "(servecap plan at this point)"
# the table one page wide at 70 % or more: a catalog device's label on two lines, the new
# ceiling's header on six, a refusal wrapped
DEVICE_WIDTH, CEILING_WIDTH, REASON_WIDTH = 22, 17, 22


@dataclass(frozen=True)
class Point:
    """One row's deployment: the binding rank's ceiling (per replica) and that rank, or why it
    could not be planned (ceiling and rank None)."""

    ceiling_requests: int | None
    binding_rank: int | None
    reason: str = ""


@dataclass(frozen=True)
class Charted:
    """The ceiling column the Envelope's chart plots: its letter, each row's value and the
    chart's title; with gaps, a row without a value (not planned) is left out of its line."""

    col: str
    value: Callable[[int], int | None]
    title: str
    gaps: bool = False


def shape(dep: Deployment) -> str:
    """'tp 4 x pp 1, vllm' (x dp N where there are replicas): whose ceiling the column holds."""
    par = dep.parallel
    dp = f" x dp {par.data_parallel_size}" if par.data_parallel_size > 1 else ""
    engine = dep.plan.budget.engine if dep.plan.budget else "plain"
    return f"tp {par.tensor_parallel_size} x pp {par.pipeline_parallel_size}{dp}, {engine}"


def headers(dep: Deployment) -> list[str]:
    per = " per replica" if dep.parallel.data_parallel_size > 1 else ""
    return [f"deployment ceiling{per}, {shape(dep)} [requests] {FROM}",
            f"binding rank {FROM}", "not planned: why"]


def points(src: WorkbookSource, rows: list[tuple[str, int, str, int]]) -> list[Point]:
    """Each (KV dtype, context, device label, device bytes) row's deployment."""
    return [_point(src, *row) for row in rows]


def _point(src: WorkbookSource, kv_dtype: str, context: int, label: str,
           device_bytes: int) -> Point:
    """The deployment at this row (every request of the row's context, as the formula columns
    plan it); a refusal is the row's reason, never an error of the workbook."""
    try:
        dep = src.replan(device_name(label, device_bytes), context, kv_dtype)
    except SpecError as exc:  # the row names the value; the field and why, as plan says it
        return Point(None, None, f"{exc.field}: {exc.allowed}")
    return Point(dep.plan.memory_ceiling_requests, dep.stages[dep.binding].ranks[0])


def device_name(label: str, device_bytes: int) -> str:
    """The catalog name a row's label gives (its interconnect and FP4 support come with it),
    the label itself where it reads back as the row's size, else the size in bytes."""
    found = from_label(label)
    if found is not None and found.usable_bytes == device_bytes:
        return found.name
    try:
        if resolve_device(label)[0] == device_bytes:
            return label
    except SpecError:
        pass
    return str(device_bytes)


def write_cells(ws, row: int, first_col: int, point: Point) -> None:
    """The row's three cells from first_col on: ceiling, binding rank, reason (empty when
    planned)."""
    ceiling = ws.cell(row=row, column=first_col, value=point.ceiling_requests)
    style.as_formula(ceiling, style.REQUESTS)
    rank = ws.cell(row=row, column=first_col + 1, value=point.binding_rank)
    style.as_formula(rank, style.COUNT)
    if point.reason:
        style.text(ws, row, first_col + 2, point.reason).alignment = style.WRAP


def fit(ws, first_col: int, device_col: int) -> None:
    """Widths once the sheet's columns are fitted (style.fit_columns): the device labels wrap,
    the deployment's ceiling and reason take what is left of the page."""
    for (cell,) in ws.iter_rows(min_row=2, min_col=device_col, max_col=device_col):
        if cell.value is not None:
            cell.alignment = style.WRAP
    device, ceiling, reason = (ws.column_dimensions[get_column_letter(col)]
                               for col in (device_col, first_col, first_col + 2))
    device.width = min(device.width, DEVICE_WIDTH)
    ceiling.width = max(ceiling.width, CEILING_WIDTH)  # never narrower than its numbers
    reason.width = REASON_WIDTH


def write_columns(ws, src: WorkbookSource, rows: list, first_col: int) -> Charted:
    """Every row's deployment cells from first_col on; the column the chart then plots."""
    for row, point in enumerate(points(src, rows), start=2):
        write_cells(ws, row, first_col, point)
    col = get_column_letter(first_col)
    per = ", per replica" if src.deployment.parallel.data_parallel_size > 1 else ""
    return Charted(col, lambda row: ws[f"{col}{row}"].value, "Memory-only ceiling vs context, "
                   f"deployment {shape(src.deployment)} (binding rank{per}), per device and "
                   "KV dtype", gaps=True)


def note(src: WorkbookSource, formula_cols: int) -> str:
    """What each column is, under a deployment's table."""
    last, first = get_column_letter(formula_cols), get_column_letter(formula_cols + 1)
    budget = ", under its engine's budget" if src.deployment.plan.budget else ""
    return (f"Columns A-{last} are formulas: the whole model on one device with the plain "
            "engine, as on the Ledger (a model larger than the device: 0 requests). Columns "
            f"{first}-{get_column_letter(formula_cols + 3)} are servecap's: the deployment on "
            f"Ranks ({shape(src.deployment)}{budget}) planned again at each "
            "row's device, context and KV dtype: its binding rank's ceiling (0 where it does "
            "not fit), that rank, and why a row could not be planned (its ceiling then empty). "
            f"The chart plots column {first}.")
