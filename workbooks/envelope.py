"""The Envelope sheet: memory-only ceiling over context x device x KV dtype, with a chart.

Each row plans the whole model on one GPU with the plain engine, as the Ledger does; its
header and chart title say so, since a tp/pp or engine deployment's ceiling (rank by rank,
under the engine's budget) is the Ranks sheet's, which a note under the table points to."""

from dataclasses import dataclass, replace

from openpyxl.utils import get_column_letter
from openpyxl.workbook.workbook import Workbook

from servecap.ledger import dtypes
from servecap.ledger.plan import Plan, build_plan, with_device

from . import charts, page, style
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
    device, context and KV dtype, the runtime peak held at the plan's (as the formula holds it)."""
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    row = 2
    runtime = src.plan().line("runtime_peak") if src is not None else 0
    kinds = src.kinds if src is not None else PURE
    for kv_dtype in sweep.kv_dtypes:
        for context in sweep.contexts_tokens:
            for label, device_bytes in sweep.devices:
                _row(ws, row, (kv_dtype, context, label, device_bytes), kinds)
                if src is not None:
                    _cache(ws, row, _point(src, kv_dtype, context, device_bytes, runtime))
                row += 1
    style.fit_columns(ws)
    ceiling = ws.column_dimensions[get_column_letter(len(HEADERS))]
    ceiling.width = max(ceiling.width, CEILING_WIDTH)  # its header in three lines, not six
    last_row = row - 1
    if src is not None and src.multi:  # a tp/pp or engine plan: these rows are not its ceiling
        last_row = row + 1
        style.note(ws, last_row, MULTI_NOTE, last_col=len(HEADERS))
        page.fit_rows(ws, last_row)
    block = _chart_block(ws, sweep)
    last_col = get_column_letter(max(block.last_col, ws.max_column))
    pivot = f"{get_column_letter(block.first_col)}1:{last_col}{block.last_row}"
    # the table, then the ceiling per context with its chart on a page of their own
    page.finish(ws, areas=[f"A1:{get_column_letter(len(HEADERS))}{last_row}", pivot])


MULTI_NOTE = ("Each row is the whole model on one device with the plain engine, as on the "
              "Ledger (a model larger than the device: 0 requests); the deployment's ceiling, "
              "rank by rank under its engine, is on Ranks.")


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


def _chart_block(ws, sweep: Sweep) -> charts.Block:
    """Ceiling vs context: one column (a line) per KV dtype and device, the chart below; the
    cells it covers."""
    first = len(HEADERS) + 2
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
            cell = ws.cell(row=2 + i, column=first + j, value=f"=H{source}")
            style.as_formula(cell, style.REQUESTS)
            remember(ws, cell.coordinate, known(ws, f"H{source}"))
            ceilings.append(known(ws, f"H{source}"))
    for col in range(first, first + len(pairs) + 1):
        ws.column_dimensions[get_column_letter(col)].width = PIVOT_WIDTH
    lines = [charts.Line(first, first + j, 2, 1 + n_ctx, 1, j - 1)
             for j in range(1, len(pairs) + 1)]
    block = charts.block_below(ws, n_ctx + 3, first, CHART_WIDTH, CHART_ROWS)
    page.break_before(ws, block.first_row - 1)  # a chart starts a page, a row down
    charts.xy_lines(ws, lines, charts.Axes(
        "Memory-only ceiling vs context, one GPU, whole model, per device and KV dtype",
        "context [tokens/request]",
        "ceiling [requests]", sweep.contexts_tokens, ceilings, x_format=charts.COUNT_AXIS),
        block)
    return block


PIVOT_WIDTH, CHART_WIDTH, CHART_ROWS = 22, 120, 28
CEILING_WIDTH = 20
