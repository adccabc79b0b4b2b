"""The Envelope sheet: memory-only ceiling over context x device x KV dtype, with a chart.

Each row plans the whole model on one GPU with the plain engine, as the Ledger does, in
formulas; its header says so. For a tp/pp or engine plan (the Ranks sheet's deployment) more
columns give that deployment's ceiling at each row, planned by servecap
(envelope_deployment.py); the chart then plots it, and a note under the table says which
column is which."""

from dataclasses import dataclass, replace

from openpyxl.utils import get_column_letter
from openpyxl.workbook.workbook import Workbook

from servecap.ledger import dtypes
from servecap.ledger.plan import Plan, build_plan, with_device

from . import charts, page, style
from . import envelope_deployment as deployed
from .cached import known, remember
from .formulas import PURE, Kinds, ceiling, extra_per_request, kv_request, safety_on
from .source import WorkbookSource

SHEET = "Envelope"
HEADERS = ["KV dtype", "KV width [bits/element]", "context [tokens/request]", "device",
           "device [bytes]", "safety on device [bytes]", "KV per request [bytes]",
           "memory-only ceiling, one GPU, whole model [requests]"]


@dataclass(frozen=True)
class Sweep:
    """devices: (label, bytes); the first KV dtype is the one charted."""

    devices: tuple[tuple[str, int], ...]
    contexts_tokens: tuple[int, ...]
    kv_dtypes: tuple[str, ...]


def write_envelope(wb: Workbook, sweep: Sweep, src: WorkbookSource | None = None) -> None:
    """With `src`, each row's safety, KV per request and ceiling are cached: build_plan at that
    device, context and KV dtype, the runtime peak held at the plan's (as the formula holds it).
    A multi source adds the deployment's columns after the formulas' (envelope_deployment)."""
    ws = wb.create_sheet(SHEET)
    multi = src is not None and src.multi and src.replan is not None
    style.header(ws, HEADERS + (deployed.headers(src.deployment) if multi else []))
    points = [(kv_dtype, context, label, device_bytes) for kv_dtype in sweep.kv_dtypes
              for context in sweep.contexts_tokens for label, device_bytes in sweep.devices]
    runtime = src.plan().line("runtime_peak") if src is not None else 0
    kinds = src.kinds if src is not None else PURE
    for row, point in enumerate(points, start=2):
        _row(ws, row, point, kinds)
        if src is not None:
            _cache(ws, row, _point(src, point[0], point[1], point[3], runtime))
    charted = _formula_ceiling(ws)
    if multi:
        charted = deployed.write_columns(ws, src, points, len(HEADERS) + 1)
    table_cols = ws.max_column
    style.fit_columns(ws)
    ceiling = ws.column_dimensions[get_column_letter(len(HEADERS))]
    ceiling.width = max(ceiling.width, CEILING_WIDTH)  # its header in three lines, not six
    if multi:
        deployed.fit(ws, len(HEADERS) + 1, device_col=4)
    last_row = len(points) + 1
    if multi:  # a tp/pp or engine plan: say which column is which
        last_row += 2
        style.note(ws, last_row, deployed.note(src, len(HEADERS)), last_col=table_cols)
        page.fit_rows(ws, last_row)
    block = _chart_block(ws, sweep, table_cols + 2, charted, fit_page=multi)
    last_col = get_column_letter(max(block.last_col, ws.max_column))
    pivot = f"{get_column_letter(block.first_col)}1:{last_col}{block.last_row}"
    # the table, then the ceiling per context with its chart on a page of their own
    page.finish(ws, areas=[f"A1:{get_column_letter(table_cols)}{last_row}", pivot])


def _formula_ceiling(ws) -> deployed.Charted:
    return deployed.Charted("H", lambda row: known(ws, f"H{row}"), "Memory-only ceiling vs "
                            "context, one GPU, whole model, per device and KV dtype")


def _point(src: WorkbookSource, kv_dtype: str, context: int, device_bytes: int,
           runtime_peak_bytes: int) -> Plan:
    serve = replace(with_device(src.serve, device_bytes), context_tokens=context,
                    kv_dtype=kv_dtype, lengths=(), runtime_peak_bytes=runtime_peak_bytes)
    return build_plan(src.spec, serve, src.overrides)


def _cache(ws, row: int, plan: Plan) -> None:
    bits = dtypes.lookup(plan.serve.kv_dtype, "kv_dtype").bits
    for col, value in (("B", bits), ("F", plan.line("safety")), ("G", plan.kv_bytes_per_request),
                       ("H", plan.memory_ceiling_requests)):
        remember(ws, f"{col}{row}", value)


def _row(ws, row: int, point: tuple[str, int, str, int], kinds: Kinds) -> None:
    """One point: the KV per request at its width; the ceiling divides by it plus the indexer K
    and the fixed states, which no KV dtype changes."""
    kv_dtype, context, label, device_bytes = point
    extra = extra_per_request(f"C{row}", kinds)
    per_request = f"(G{row}{extra})" if extra else f"G{row}"
    cells = (
        (kv_dtype, None, True), (f"=VLOOKUP(A{row},dtype_bits,2,FALSE)", style.BITS, False),
        (context, style.TOKENS, True), (label, None, True), (device_bytes, style.BYTES, True),
        ("=" + safety_on(f"E{row}"), style.BYTES, False),
        ("=" + kv_request(f"C{row}", f"B{row}", kinds), style.BYTES, False),
        (ceiling(f"E{row}", f"F{row}", "weights_bytes", per_request, kinds), style.REQUESTS,
         False),
    )
    for col, (value, number_format, is_input) in enumerate(cells, start=1):
        cell = ws.cell(row=row, column=col, value=value)
        (style.as_input if is_input else style.as_formula)(cell, number_format)


def _chart_block(ws, sweep: Sweep, first: int, charted: deployed.Charted,
                 fit_page: bool = False) -> charts.Block:
    """Ceiling vs context: one column (a line) per KV dtype and device, the chart below; the
    cells it covers. A row not planned leaves its cell empty (a gap in its line). fit_page:
    the chart's rows counted by their heights, the chart no taller than its page leaves under
    the repeated header (rows beside a wrapped table are taller)."""
    style.header_cell(ws.cell(row=1, column=first, value="context [tokens]"))
    n_ctx, n_dev = len(sweep.contexts_tokens), len(sweep.devices)
    pairs = [(d, kv) for kv in range(len(sweep.kv_dtypes)) for d in range(n_dev)]
    for j, (d, kv) in enumerate(pairs, start=1):
        style.header_cell(ws.cell(row=1, column=first + j, value=f"{sweep.devices[d][0]}, "
                                  f"{sweep.kv_dtypes[kv]} KV [requests]"))
    ceilings = []
    for i in range(n_ctx):
        cell = ws.cell(row=2 + i, column=first, value=f"=C{2 + i * n_dev}")
        style.as_formula(cell, style.TOKENS)
        remember(ws, cell.coordinate, sweep.contexts_tokens[i])
        for j, (d, kv) in enumerate(pairs, start=1):
            source = 2 + (kv * n_ctx + i) * n_dev + d
            value = charted.value(source)
            if charted.gaps and value is None:
                continue
            cell = ws.cell(row=2 + i, column=first + j, value=f"={charted.col}{source}")
            style.as_formula(cell, style.REQUESTS)
            remember(ws, cell.coordinate, value)
            ceilings.append(value)
    for col in range(first, first + len(pairs) + 1):
        ws.column_dimensions[get_column_letter(col)].width = PIVOT_WIDTH
    lines = [charts.Line(first, first + j, 2, 1 + n_ctx, 1, j - 1)
             for j in range(1, len(pairs) + 1)]
    height = _chart_points(ws, n_ctx + 3) if fit_page else None
    block = charts.block_below(ws, n_ctx + 3, first, CHART_WIDTH, CHART_ROWS, height)
    page.break_before(ws, block.first_row - 1)  # a chart starts a page, a row down
    charts.xy_lines(ws, lines, charts.Axes(
        charted.title, "context [tokens/request]",
        "ceiling [requests]", sweep.contexts_tokens, ceilings or [0],
        x_format=charts.COUNT_AXIS), block)
    return block


def _chart_points(ws, first_row: int) -> float:
    """The chart's height: its rows' default, or what its page leaves under the repeated
    header and the blank row above the chart, with the wrapped rows' heights set."""
    page.fit_rows(ws)
    room = page.BODY_POINTS - page.SLACK_POINTS - page.row_points(ws, 1) \
        - page.row_points(ws, first_row - 1)
    return min(CHART_ROWS * charts.DEFAULT_ROW_PT, room)


PIVOT_WIDTH, CHART_WIDTH, CHART_ROWS = 22, 120, 28
CEILING_WIDTH = 20
