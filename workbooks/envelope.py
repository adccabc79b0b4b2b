"""The Envelope sheet: memory-only ceiling over context x device x KV dtype, with a chart."""

from dataclasses import dataclass

from openpyxl.chart import LineChart, Reference
from openpyxl.workbook.workbook import Workbook

from . import style
from .formulas import ceiling, kv_request, safety_on

SHEET = "Envelope"
HEADERS = ["KV dtype", "KV width [bits/element]", "context [tokens/request]", "device",
           "device [bytes]", "safety on device [bytes]", "KV per request [bytes]",
           "memory-only ceiling [requests]"]


@dataclass(frozen=True)
class Sweep:
    """devices: (label, bytes); the first KV dtype is the one charted."""

    devices: tuple[tuple[str, int], ...]
    contexts_tokens: tuple[int, ...]
    kv_dtypes: tuple[str, ...]


def write_envelope(wb: Workbook, sweep: Sweep) -> None:
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    row = 2
    for kv_dtype in sweep.kv_dtypes:
        for context in sweep.contexts_tokens:
            for label, device_bytes in sweep.devices:
                _row(ws, row, kv_dtype, context, label, device_bytes)
                row += 1
    _chart_block(ws, sweep)
    style.fit_columns(ws)


def _row(ws, row: int, kv_dtype: str, context: int, label: str, device_bytes: int) -> None:
    cells = (
        (kv_dtype, None, True), (f"=VLOOKUP(A{row},dtype_bits,2,FALSE)", style.BITS, False),
        (context, style.TOKENS, True), (label, None, True), (device_bytes, style.BYTES, True),
        ("=" + safety_on(f"E{row}"), style.BYTES, False),
        ("=" + kv_request(f"C{row}", f"B{row}"), style.BYTES, False),
        (ceiling(f"E{row}", f"F{row}", "weights_bytes", f"G{row}"), style.REQUESTS, False),
    )
    for col, (value, number_format, is_input) in enumerate(cells, start=1):
        cell = ws.cell(row=row, column=col, value=value)
        (style.as_input if is_input else style.as_formula)(cell, number_format)


def _chart_block(ws, sweep: Sweep) -> None:
    """Ceiling vs context for the first KV dtype, one column (series) per device."""
    first = len(HEADERS) + 2
    ws.cell(row=1, column=first, value=f"context [tokens] ({sweep.kv_dtypes[0]} KV)")
    per_context = len(sweep.devices)
    for i in range(len(sweep.contexts_tokens)):
        style.as_formula(ws.cell(row=2 + i, column=first, value=f"=C{2 + i * per_context}"),
                         style.TOKENS)
        for j, (label, _) in enumerate(sweep.devices):
            ws.cell(row=1, column=first + 1 + j, value=f"{label} [requests]")
            source = 2 + i * per_context + j
            style.as_formula(ws.cell(row=2 + i, column=first + 1 + j, value=f"=H{source}"),
                             style.REQUESTS)
    last = 1 + len(sweep.contexts_tokens)
    chart = LineChart()
    chart.title = f"Memory-only ceiling vs context ({sweep.kv_dtypes[0]} KV)"
    chart.x_axis.title, chart.y_axis.title = "context [tokens/request]", "ceiling [requests]"
    data = Reference(ws, min_col=first + 1, max_col=first + per_context, min_row=1,
                     max_row=last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=first, min_row=2, max_row=last))
    chart.height, chart.width = 9, 18
    ws.add_chart(chart, ws.cell(row=last + 3, column=first).coordinate)
