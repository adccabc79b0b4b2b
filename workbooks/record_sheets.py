"""Latency record, checklist and verification sheets: the seed's review pages, never invented."""

from collections.abc import Mapping, Sequence

from openpyxl.formatting.rule import FormulaRule
from openpyxl.styles import PatternFill
from openpyxl.workbook.workbook import Workbook

from servecap.ledger.errors import SpecError

from . import charts, style

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
SWEEP_COLUMNS = (
    ("rate_per_s", "offered req/s", '#,##0.00" req/s"'),
    ("achieved_rps", "achieved req/s", '#,##0.00" req/s"'),
    ("slo_attainment", "SLO met", style.FRACTION),
    ("goodput_rps", "goodput req/s", '#,##0.00" req/s"'),
    ("output_tokens_per_s", "output tokens/s", style.TOKENS_PER_S),
    ("ttft_p99_ms", "TTFT p99", style.MS), ("itl_p99_ms", "ITL p99", style.MS),
    ("e2e_p99_ms", "e2e p99", style.MS), ("meets_slo", "capacity holds", None),
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
    row = _record(ws, row + 1, results.get("record") or {})
    if results.get("sweep"):
        _sweep(ws, row + 2, results["sweep"], results.get("slo_ms") or {})
    style.fit_columns(ws, minimum=14)
    if not results:
        ws.sheet_state = "hidden"  # a blank template: shown once simulate or verify fills it


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
        style.as_input(ws.cell(row=row, column=3, value=record.get(key)))
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


LATENCY_SERIES = (("ttft_p99_ms", "F"), ("itl_p99_ms", "G"), ("e2e_p99_ms", "H"))


def _sweep_chart(ws, header: int, last: int, slo_ms: Mapping) -> None:
    """p99 latencies against offered load, a flat line per declared SLO, and the capacity
    (the highest offered rate that still holds the SLO) marked on the e2e line."""
    _check_keys(slo_ms, {key for key, _ in LATENCY_SERIES}, "slo_ms")
    col = len(SWEEP_COLUMNS) + 2
    titles = [f"{label} [ms]" for key, label, _ in SWEEP_COLUMNS if key.endswith("p99_ms")]
    for j, title in enumerate(titles):
        ws.cell(row=header, column=col + j, value=title)
        for r in range(header + 1, last + 1):
            cell = ws.cell(row=r, column=col + j, value=f"={LATENCY_SERIES[j][1]}{r}")
            style.as_formula(cell, style.MS)
    extra = col + len(titles)
    for key, _ in LATENCY_SERIES:
        if slo_ms.get(key) is not None:
            ws.cell(row=header, column=extra, value=f"SLO {key.removesuffix('_ms')} [ms]")
            for r in range(header + 1, last + 1):
                style.as_input(ws.cell(row=r, column=extra, value=slo_ms[key]), style.MS)
            extra += 1
    rates, held = f"$A${header + 1}:$A${last}", f"$I${header + 1}:$I${last}"
    ws.cell(row=header, column=extra, value="capacity [ms]")
    for r in range(header + 1, last + 1):
        style.as_formula(ws.cell(row=r, column=extra, value=(
            f"=IF(A{r}=SUMPRODUCT(MAX(({held}=TRUE)*{rates})),H{r},NA())")), style.MS)
    chart = charts.lines_by_column(
        ws, 1, col, extra, header, last, ws.cell(row=last + 3, column=1).coordinate,
        "p99 latency vs offered load (SLO lines, capacity marked)", "offered load [req/s]",
        "latency [ms]")
    chart.series[-1].graphicalProperties.line.noFill = True  # capacity: the marker only
    chart.series[-1].marker.size = 10


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
    for col, title in enumerate(("failure", "check", "what to measure", "where"), start=1):
        cell = ws.cell(row=row + 1, column=col, value=title)
        cell.font, cell.fill = style.HEADER_FONT, style.HEADER_FILL
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
RECORD_LABELS = (("machine", "machine"), ("device", "device"), ("device_name", "device"),
                 ("torch_version", "torch"), ("cuda_version", "CUDA"),
                 ("driver_version", "driver"), ("config_hash", "config hash"),
                 ("date", "date (UTC)"))
GOOD = PatternFill("solid", start_color="C6EFCE")
BAD = PatternFill("solid", start_color="FFC7CE")


def fill_verification(wb: Workbook, rows: Sequence[Mapping],
                      record: Mapping | None = None) -> None:
    """One row per line: {line, predicted_bytes, measured_bytes, residual_bytes, verdict},
    optionally tolerance_bytes, name (readable; else servecap's name for the key) and unit
    ('requests' for the ceiling row); a missing measurement stays blank. Given any tolerance
    or name, the tolerance and readable name follow the verdict; `record` (machine, device,
    torch/CUDA/driver versions, config hash, date, ...) goes below the table."""
    ws = wb[VERIFY_SHEET]
    ws.sheet_state = "visible"
    ws.delete_rows(2, ws.max_row)
    extended = any("tolerance_bytes" in r or "name" in r for r in rows)
    if extended:
        style.header(ws, list(VERIFY_HEADERS) + list(EXTRA_HEADERS))
    allowed = set(VERIFY_HEADERS) | {"tolerance_bytes", "name", "unit"}
    for r, item in enumerate(rows, start=2):
        _check_keys(item, allowed, "verification row")
        _verification_row(ws, r, item, extended)
    last = len(rows) + 1
    _verdict_colours(ws, last)
    if record:
        _run_record(ws, last + 2, record)
    style.fit_columns(ws, minimum=16)
    style.print_setup(ws)


def _verification_row(ws, r: int, item: Mapping, extended: bool) -> None:
    fmt = style.REQUESTS if item.get("unit") == "requests" else style.BYTES
    values = [item.get(key) for key in VERIFY_HEADERS]
    if extended:
        key = item.get("line")
        values += [item.get("tolerance_bytes"),
                   item.get("name") or READABLE_LINES.get(key, str(key).replace("_", " "))]
    for col, value in enumerate(values, start=1):
        cell = ws.cell(row=r, column=col, value=value)
        if col in (2, 3, 4, 6):
            style.as_formula(cell, fmt)


def _verdict_colours(ws, last: int) -> None:
    """ok: green; a verdict other than ok or 'not measured': red."""
    if last < 2:
        return
    area = f"E2:E{last}"
    ws.conditional_formatting.add(area, FormulaRule(formula=['E2="ok"'], fill=GOOD))
    ws.conditional_formatting.add(area, FormulaRule(
        formula=['AND(E2<>"",E2<>"ok",E2<>"not measured")'], fill=BAD))


def _run_record(ws, row: int, record: Mapping) -> None:
    """The run's provenance: the known fields first, labelled, then anything else given."""
    style.section(ws, row, "run record: where these measurements come from")
    labels = dict(RECORD_LABELS)
    keys = [k for k, _ in RECORD_LABELS if k in record] + \
        [k for k in record if k not in labels]
    for offset, key in enumerate(keys, start=1):
        ws.cell(row=row + offset, column=1, value=labels.get(key, key.replace("_", " ")))
        ws.cell(row=row + offset, column=2, value=str(record[key]))
