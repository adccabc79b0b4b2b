"""Latency record, checklist and verification sheets: the seed's review pages, never invented."""

from collections.abc import Mapping, Sequence

from openpyxl.formatting.rule import FormulaRule
from openpyxl.styles import PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.workbook.workbook import Workbook

from servecap.ledger.errors import SpecError

from . import charts, page, style

LATENCY_SHEET, VERIFY_SHEET = "Latency record", "Verification"
PERCENTILE_METRICS = (
    ("queue_delay_ms", "queue delay", style.MS),
    ("ttft_ms", "time to first token (TTFT)", style.MS),
    ("itl_ms", "inter-token latency (ITL)", '#,##0.00" ms/token"'),
    ("e2e_ms", "end-to-end latency", style.MS),
)
PERCENTILES = ("p50", "p95", "p99")
RATES = (("input_tokens_per_s", "input tokens/s (prefill)"),
         ("output_tokens_per_s", "output tokens/s (decode)"))
RECORD_FIELDS = (
    ("model_revision", "model and revision"), ("tokenizer_revision", "tokenizer revision"),
    ("prompt_distribution", "prompt length distribution [tokens]"),
    ("output_distribution", "output length distribution [tokens]"),
    ("slo", "declared SLO (TTFT, ITL, end-to-end)"), ("warmup", "warm-up"),
    ("kernel_versions", "kernel versions"), ("driver_versions", "driver versions"),
    ("accelerator_topology", "accelerator topology"),
    ("offered_rate", "offered rate [requests/s]"),
    ("achieved_rate", "achieved completion rate [requests/s]"),
    ("load_generator", "load generator (open or closed loop)"),
    ("source", "source of these numbers (simulation or verification run)"),
)
# Numeric fields of the record, formatted (the rest is text).
RECORD_FORMATS = {"offered_rate": style.RATE, "achieved_rate": style.RATE}
SWEEP_COLUMNS = (
    ("rate_per_s", "offered req/s", style.RATE),
    ("achieved_rps", "achieved req/s", style.RATE),
    ("slo_attainment", "SLO met", style.FRACTION),
    ("goodput_rps", "goodput req/s", style.RATE),
    ("output_tokens_per_s", "output tokens/s", style.TOKENS_PER_S),
    ("ttft_p99_ms", "TTFT p99", style.MS), ("itl_p99_ms", "ITL p99", style.MS),
    ("tpot_p99_ms", "TPOT p99", style.MS), ("e2e_p99_ms", "e2e p99", style.MS),
    ("meets_slo", "capacity holds", style.BOOL),
)
VERIFY_HEADERS = ("line", "predicted_bytes", "measured_bytes", "residual_bytes", "verdict")


def write_latency(wb: Workbook, results: Mapping | None = None) -> None:
    """Blank value cells under the field names unless `results` gives them: keys are the metric
    keys above (each {p50, p95, p99} in ms), the rate keys, and 'record' {field key: text}."""
    results = dict(results or {})
    _check_keys(results, {k for k, _, _ in PERCENTILE_METRICS} | {k for k, _ in RATES}
                | {"record", "sweep", "slo_ms"}, "results")
    ws = wb.create_sheet(LATENCY_SHEET)
    style.header(ws, ["metric", "key", "p50", "p95", "p99"])
    row = 2
    for key, label, number_format in PERCENTILE_METRICS:
        values = results.get(key) or {}
        _check_keys(values, set(PERCENTILES), key)
        ws.cell(row=row, column=1, value=label)
        ws.cell(row=row, column=2, value=key)
        for col, pct in enumerate(PERCENTILES, start=3):
            style.as_input(ws.cell(row=row, column=col, value=values.get(pct)), number_format)
        row += 1
    row = _rates(ws, row + 1, results)
    record_row = row + 1
    row = _record(ws, record_row, results.get("record") or {})
    table_end = len(PERCENTILES) + 2
    if results.get("sweep"):
        table_end = len(SWEEP_COLUMNS)
    _merge_record(ws, record_row + 1, row, table_end)
    if results.get("sweep"):
        _sweep(ws, row + 2, results["sweep"], results.get("slo_ms") or {})
    style.fit_columns(ws, minimum=14)
    ws.column_dimensions["A"].width = max(ws.column_dimensions["A"].width, LABEL_WIDTH)
    if not results:
        ws.sheet_state = "hidden"  # a blank template: shown once simulate or verify fills it
    # one page of record and sweep table, its own headers: no header row repeated
    page.finish(ws, areas=[page.used_range(ws, max_col=table_end)], title_rows=None)


LABEL_WIDTH = 26


def _merge_record(ws, first: int, last: int, last_col: int) -> None:
    """A record's text spans the value columns and wraps there, inside the print area."""
    for row in range(first, last + 1):
        if isinstance(ws.cell(row=row, column=3).value, str):
            ws.merge_cells(start_row=row, start_column=3, end_row=row, end_column=last_col)


def _rates(ws, row: int, results: Mapping) -> int:
    style.section(ws, row, "throughput: input and output counted separately")
    for key, label in RATES:
        row += 1
        ws.cell(row=row, column=1, value=label)
        ws.cell(row=row, column=2, value=key)
        style.as_input(ws.cell(row=row, column=3, value=results.get(key)), style.TOKENS_PER_S)
    return row + 1


def _record(ws, row: int, record: Mapping) -> None:
    _check_keys(record, {k for k, _ in RECORD_FIELDS}, "record")
    style.section(ws, row, "benchmark input record: without these a latency number is not "
                  "comparable")
    for key, label in RECORD_FIELDS:
        row += 1
        ws.cell(row=row, column=1, value=label)
        ws.cell(row=row, column=2, value=key)
        ws.cell(row=row, column=1).alignment = style.WRAP
        value = record.get(key)
        cell = style.text(ws, row, 3, value)
        style.as_input(cell, RECORD_FORMATS.get(key) if isinstance(value, int | float) else None)
        if isinstance(value, str):
            cell.alignment = style.WRAP  # merged across the value columns once widths are set
    return row


def _sweep(ws, row: int, points: Sequence[Mapping], slo_ms: Mapping) -> None:
    """The offered-load envelope: one row per swept rate, keys as SWEEP_COLUMNS; slo_ms
    ({ttft_p99_ms, itl_p99_ms, e2e_p99_ms}) draws the SLO lines on its chart."""
    style.section(ws, row, "offered-load sweep: the capacity envelope (open loop)")
    frozen = ws.freeze_panes
    style.header(ws, [label for _, label, _ in SWEEP_COLUMNS], row=row + 1)
    ws.freeze_panes = frozen  # the sheet's own header stays the frozen one
    for r, point in enumerate(points, start=row + 2):
        _check_keys(point, {k for k, _, _ in SWEEP_COLUMNS}, "sweep point")
        for col, (key, _, number_format) in enumerate(SWEEP_COLUMNS, start=1):
            style.as_input(ws.cell(row=r, column=col, value=point.get(key)), number_format)
    _sweep_chart(ws, row + 1, row + 1 + len(points), slo_ms)


sweep_section = _sweep  # for a sheet of its own: `servecap load --sweep --xlsx`
LATENCY_SERIES = ("ttft_p99_ms", "itl_p99_ms", "tpot_p99_ms", "e2e_p99_ms")
HELPER_GAP = 2  # empty columns between the table and the chart's own cells (not printed)


def _sweep_chart(ws, header: int, last: int, slo_ms: Mapping) -> None:
    """p99 latencies against offered load, each declared SLO a dashed line in its metric's
    colour, and the capacity (the highest offered rate that still holds the SLO) marked on
    the e2e line. The SLO lines and the capacity point sit in cells right of the printed
    table."""
    _check_keys(slo_ms, set(LATENCY_SERIES), "slo_ms")
    column = {key: col for col, (key, _, _) in enumerate(SWEEP_COLUMNS, start=1)}
    shown = [key for key in LATENCY_SERIES
             if any(ws.cell(row=r, column=column[key]).value is not None
                    for r in range(header + 1, last + 1))]
    lines = [charts.Line(1, column[key], header + 1, last, header, i)
             for i, key in enumerate(LATENCY_SERIES) if key in shown]
    helper = len(SWEEP_COLUMNS) + HELPER_GAP + 1
    lines += _slo_lines(ws, header, last, helper, slo_ms, column)
    lines.append(_capacity_point(ws, header, last, helper + 1 + len(slo_ms), column))
    values = [ws.cell(row=r, column=column[k]).value for k in shown
              for r in range(header + 1, last + 1)]
    values += [v for v in slo_ms.values() if v is not None]
    block = charts.block_below(ws, last + 3, 1, CHART_WIDTH, CHART_ROWS)
    page.break_before(ws, block.first_row - 1)  # a chart starts a page, a row down
    chart = charts.xy_lines(ws, lines, charts.Axes(
        "p99 latency vs offered load (dashed: SLO; large dot: the capacity)",
        "offered load [req/s]", "p99 latency [ms]", y_values=values), block)
    marker = chart.series[-1]
    marker.graphicalProperties.line.noFill = True  # capacity: the marker only
    marker.marker.symbol, marker.marker.size = "circle", 11


CHART_WIDTH, CHART_ROWS = 120, 30


def _slo_lines(ws, header: int, last: int, col: int, slo_ms: Mapping,
               column: dict) -> list:
    """Flat lines from the lowest to the highest offered rate, one per declared SLO."""
    rates = f"$A${header + 1}:$A${last}"
    ws.cell(row=header, column=col, value="SLO lines: offered req/s")
    for r, func in ((header + 1, "MIN"), (header + 2, "MAX")):
        style.as_formula(ws.cell(row=r, column=col, value=f"={func}({rates})"), style.RATE)
    out = []
    for key in LATENCY_SERIES:
        if slo_ms.get(key) is None:
            continue
        target = col + 1 + len(out)
        label = dict((k, lbl) for k, lbl, _ in SWEEP_COLUMNS)[key]
        ws.cell(row=header, column=target, value=f"SLO {label} [ms]")
        for r in (header + 1, header + 2):
            style.as_input(ws.cell(row=r, column=target, value=slo_ms[key]), style.MS)
        out.append(charts.Line(col, target, header + 1, header + 2, header,
                               LATENCY_SERIES.index(key), dashed=True, marker=False))
    return out


def _capacity_point(ws, header: int, last: int, col: int, column: dict):
    """The capacity rate and its e2e p99: one point (#N/A, so no point, when none holds)."""
    rates = f"$A${header + 1}:$A${last}"
    held = f"${get_column_letter(column['meets_slo'])}${header + 1}:" \
        f"${get_column_letter(column['meets_slo'])}${last}"
    e2e = get_column_letter(column["e2e_p99_ms"])
    ws.cell(row=header, column=col, value="capacity [req/s]")
    ws.cell(row=header, column=col + 1, value="capacity")
    style.as_formula(ws.cell(row=header + 1, column=col, value=(
        f"=IF(SUMPRODUCT(--({held}=TRUE))=0,NA(),SUMPRODUCT(MAX(({held}=TRUE)*{rates})))")),
        style.RATE)
    cap = get_column_letter(col)
    style.as_formula(ws.cell(row=header + 1, column=col + 1, value=(
        f"=INDEX(${e2e}${header + 1}:${e2e}${last},MATCH({cap}{header + 1},{rates},0))")),
        style.MS)
    return charts.Line(col, col + 1, header + 1, header + 1, header,
                       LATENCY_SERIES.index("e2e_p99_ms"))


def _check_keys(given: Mapping, allowed: set[str], field: str) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise SpecError(field, unknown[0], "allowed keys: " + ", ".join(sorted(allowed)))


CHECKLIST = (
    ("OOM", "separate the ledger lines", "load-time weights, runtime peak, logical KV, physical "
     "KV blocks, allocator reserve, communication buffers", "servecap plan (Ledger sheet); "
     "servecap verify (Verification sheet)"),
    ("OOM", "record the exact phase", "model load, prefill admission, decode growth or graph "
     "capture, with allocated and reserved bytes at each", "servecap verify"),
    ("OOM", "do not hide an underestimate", "lowering concurrency can hide an undersized "
     "per-request cache; lowering max length can hide an unbounded admission policy",
     "Ledger: kv_bytes_per_request; Envelope sheet"),
    ("queue growth", "admitted work vs completion capacity", "queue age, TTFT stretch, "
     "offered rate vs achieved completion rate (open-loop load)", "servecap simulate; "
     "Latency record sheet"),
    ("queue growth", "stop the retry feedback loop", "retries per request, queue bound, "
     "load shed, admission rejections", "servecap simulate (queue delay p95/p99)"),
    ("queue growth", "tails by request class", "joint prompt/output distribution of the slowest "
     "1%: queue age, prefill chunks, evictions, replica", "Latency record sheet"),
    ("cache fragmentation", "logical vs reserved KV", "logical live KV bytes vs reserved block "
     "bytes, unused slots in last blocks", "Paging sheet; servecap blocks"),
    ("cache fragmentation", "thrash below the OOM line", "preemptions, evictions, swaps, "
     "prefix recomputation, recomputed tokens, allocation failures", "servecap simulate; "
     "servecap verify"),
    ("cache fragmentation", "block size against the real distribution", "slots wasted and "
     "block-table entries at each block size for the real lengths, not the average",
     "Paging sheet; servecap blocks --block-size"),
    ("cache fragmentation", "prefix cache pays for itself", "prefix-cache hit rate and reuse "
     "lifetime vs the bytes held", "servecap plan --shared-prefix"),
)


def write_checklist(ws, row: int) -> None:
    """The review checklist as a table from `row` (on the Summary: what to check next)."""
    style.section(ws, row, "before trusting the plan: what to check, and where servecap "
                  "reports it")
    style.header(ws, ["failure", "check", "what to measure", "where"], row=row + 1)
    ws.freeze_panes = "A2"
    for r, item in enumerate(CHECKLIST, start=row + 2):
        for col, value in enumerate(item, start=1):
            cell = ws.cell(row=r, column=col, value=value)
            cell.alignment = style.WRAP


def write_verification(wb: Workbook) -> None:
    """Headers only: predicted vs measured is filled by a verification run, never invented."""
    ws = wb.create_sheet(VERIFY_SHEET)
    style.header(ws, list(VERIFY_HEADERS))
    style.fit_columns(ws, minimum=16)
    ws.sheet_state = "hidden"  # shown once a verification run fills it
    page.finish(ws)


READABLE_LINES = {
    "weights": "weights", "weight_metadata": "weight metadata (scales, zero points)",
    "runtime_peak": "runtime peak (activations, workspaces)", "kv_cache": "KV cache in use",
    "kv_pool": "KV pool (allocated blocks)", "kv_pool_spare": "KV pool, unused blocks",
    "safety": "safety reserve", "non_torch": "non-torch memory (CUDA context, cuBLAS)",
    "comm_buffers": "communication buffers", "cuda_graphs": "CUDA graph pool",
    "allocator_reserve": "allocator reserve (reserved - allocated)",
    "memory_ceiling_requests": "memory-only ceiling [requests]",
    "ceiling": "memory-only ceiling [requests]",
}
EXTRA_HEADERS = ("tolerance_bytes", "line name")
RULE_HEADER = "tolerance"  # the rule a line is held to, in words (exact, <= declared budget)
RECORD_LABELS = (("machine", "machine"), ("device", "device"), ("device_name", "device"),
                 ("torch_version", "torch"), ("cuda_version", "CUDA"),
                 ("driver_version", "driver"), ("config_hash", "config hash"),
                 ("date", "date (UTC)"))
GOOD = PatternFill("solid", start_color="C6EFCE")
BAD = PatternFill("solid", start_color="FFC7CE")


def fill_verification(wb: Workbook, rows: Sequence[Mapping],
                      record: Mapping | None = None) -> None:
    """One row per line: {line, predicted_bytes, measured_bytes, residual_bytes, verdict},
    optionally tolerance_bytes, name (readable; else servecap's name for the key), unit
    ('requests' for the ceiling row) and tolerance (the rule in words); a missing measurement
    stays blank. Given any tolerance or name, the tolerance and readable name follow the
    verdict (and the rule, when given); `record` (machine, device, torch/CUDA/driver
    versions, config hash, date, ...) goes below the table."""
    ws = wb[VERIFY_SHEET]
    ws.sheet_state = "visible"
    ws.delete_rows(2, ws.max_row)
    extended = any("tolerance_bytes" in r or "name" in r for r in rows)
    rule = any("tolerance" in r for r in rows)
    headers = list(VERIFY_HEADERS) + (list(EXTRA_HEADERS) if extended or rule else []) + \
        ([RULE_HEADER] if rule else [])
    style.header(ws, headers)
    allowed = set(VERIFY_HEADERS) | {"tolerance_bytes", "name", "unit", "tolerance"}
    for r, item in enumerate(rows, start=2):
        _check_keys(item, allowed, "verification row")
        _verification_row(ws, r, item, extended or rule, rule)
    last = len(rows) + 1
    _verdict_colours(ws, last)
    if record:
        _run_record(ws, last + 2, record)
    style.fit_columns(ws, minimum=12)
    page.finish(ws)


def _verification_row(ws, r: int, item: Mapping, extended: bool, rule: bool) -> None:
    fmt = style.REQUESTS if item.get("unit") == "requests" else style.BYTES
    values = [item.get(key) for key in VERIFY_HEADERS]
    if extended:
        key = item.get("line")
        values += [item.get("tolerance_bytes"),
                   item.get("name") or READABLE_LINES.get(key, str(key).replace("_", " "))]
    if rule:
        values.append(item.get("tolerance"))
    for col, value in enumerate(values, start=1):
        cell = style.text(ws, r, col, value)
        if col in (2, 3, 4, 6):
            style.as_formula(cell, fmt)
        elif col == 8:
            cell.alignment = style.WRAP


def _verdict_colours(ws, last: int) -> None:
    """ok: green; a verdict other than ok, 'reported' (a line that has no bound) or 'not
    measured': red."""
    if last < 2:
        return
    area = f"E2:E{last}"
    ws.conditional_formatting.add(area, FormulaRule(formula=['E2="ok"'], fill=GOOD))
    ws.conditional_formatting.add(area, FormulaRule(
        formula=['AND(E2<>"",E2<>"ok",E2<>"reported",E2<>"not measured")'], fill=BAD))


def _run_record(ws, row: int, record: Mapping) -> None:
    """The run's provenance: the known fields first, labelled, then anything else given."""
    style.section(ws, row, "run record: where these measurements come from")
    labels = dict(RECORD_LABELS)
    keys = [k for k, _ in RECORD_LABELS if k in record] + \
        [k for k in record if k not in labels]
    for offset, key in enumerate(keys, start=1):
        ws.cell(row=row + offset, column=1, value=labels.get(key, key.replace("_", " ")))
        style.text(ws, row + offset, 2, str(record[key]))
        ws.merge_cells(start_row=row + offset, start_column=2, end_row=row + offset,
                       end_column=len(VERIFY_HEADERS))
        ws.cell(row=row + offset, column=2).alignment = style.WRAP
