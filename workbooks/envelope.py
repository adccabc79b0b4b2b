"""The Envelope sheet: memory-only ceiling over context x device x KV dtype, with a chart."""

from dataclasses import dataclass

from openpyxl.workbook.workbook import Workbook

from . import charts, style
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
    """Ceiling vs context: one column (a line) per KV dtype and device."""
    first = len(HEADERS) + 2
    ws.cell(row=1, column=first, value="context [tokens]")
    n_ctx, n_dev = len(sweep.contexts_tokens), len(sweep.devices)
    pairs = [(d, kv) for kv in range(len(sweep.kv_dtypes)) for d in range(n_dev)]
    for j, (d, kv) in enumerate(pairs, start=1):
        ws.cell(row=1, column=first + j,
                value=f"{sweep.devices[d][0]}, {sweep.kv_dtypes[kv]} KV [requests]")
    for i in range(n_ctx):
        style.as_formula(ws.cell(row=2 + i, column=first, value=f"=C{2 + i * n_dev}"),
                         style.TOKENS)
        for j, (d, kv) in enumerate(pairs, start=1):
            source = 2 + (kv * n_ctx + i) * n_dev + d
            style.as_formula(ws.cell(row=2 + i, column=first + j, value=f"=H{source}"),
                             style.REQUESTS)
    charts.lines_by_column(ws, first, first + 1, first + len(pairs), 1, 1 + n_ctx,
                           ws.cell(row=n_ctx + 4, column=first).coordinate,
                           "Memory-only ceiling vs context, per device and KV dtype",
                           "context [tokens/request]", "ceiling [requests]")
