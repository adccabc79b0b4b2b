"""The Quantization sheet: weights, activations and KV as three separate decisions (seed 000)."""

from openpyxl.workbook.workbook import Workbook

from servecap.ledger.plan import Plan

from . import page, style
from .formulas import PURE, Kinds, ceiling, extra_per_request, kv_request, weights_computed
from .names import define

SHEET = "Quantization"
HEADERS = ["representation", "dtype", "width [bits/element]", "width [bytes/element]",
           "metadata [bytes]", "memory saved vs bf16 [bytes]", "ceiling now [requests]",
           "ceiling at bf16 [requests]", "effect on ceiling [requests]",
           "measure before trusting it"]
_BF16_WEIGHTS = weights_computed("16", "16")


def rows(kinds: Kinds) -> tuple:
    """(representation, dtype, bits, metadata, saved, ceiling at bf16, what to measure); the
    ceilings divide by one request's caches (KV + indexer K + fixed states)."""
    bf16_kv = kv_request("context_tokens", "16", kinds)
    return (
        ("weights", "=weight_dtype", "=quantized_bits_per_parameter", "=weight_metadata_bytes",
         f"=IF(declared_weights_bytes>0,0,{_BF16_WEIGHTS}-weights_bytes-weight_metadata_bytes)",
         ceiling("device_bytes", "safety_bytes", f"({_BF16_WEIGHTS})",
                 "cache_bytes_per_request", kinds),
         "task quality on your own eval (not only perplexity); dequant/matmul kernels for this "
         "format on the target device; latency at the deployed batch shape (small batches can "
         "slow down); that metadata has not erased the saving"),
        ("activations", "=activation_dtype", "=VLOOKUP(activation_dtype,dtype_bits,2,FALSE)", 0,
         None, None,
         "outlier channels (SmoothQuant-style calibration); W8A8 kernels on the device; "
         "quality; the runtime peak at the largest batch shape (servecap verify) - not "
         "modelled here"),
        ("KV cache", "=kv_dtype", "=kv_bits_per_element", 0,
         f"=({bf16_kv}-kv_bytes_per_request)*requests",
         ceiling("device_bytes", "safety_bytes", "weights_bytes",
                 f"({bf16_kv}{extra_per_request('context_tokens', kinds)})", kinds),
         "long-context quality; attention kernels for this KV dtype; inter-token latency at the "
         "deployed batch; per-token scales this table does not count"),
    )


def write_quantization(wb: Workbook, plan: Plan | None = None, kinds: Kinds = PURE,
                       stored: tuple = ()) -> None:
    """With `plan`, the columns are as wide as its magnitudes need (the formulas here carry
    no cached values to measure); `stored` (the checkpoint's FormatShares) add the table the
    Ledger's weights line sums."""
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    for r, row in enumerate(rows(kinds), start=2):
        name, dtype, bits, meta, saved, bf16_ceiling, measure = row
        values = (name, dtype, bits, f"=C{r}/8", meta, saved, "=memory_ceiling_requests",
                  bf16_ceiling, f"=G{r}-H{r}" if bf16_ceiling else None, measure)
        formats = (None, None, style.BITS, "0.00", style.BYTES, style.BYTES, style.REQUESTS,
                   style.REQUESTS, '+#,##0" requests";-#,##0" requests";0" requests"', None)
        for col, (value, number_format) in enumerate(zip(values, formats, strict=True), 1):
            style.as_formula(ws.cell(row=r, column=col, value=value), number_format)
        ws.cell(row=r, column=len(HEADERS)).alignment = style.TEXT_BESIDE_NUMBER
    style.fit_columns(ws, maximum=40)
    if plan is not None:
        _widths(ws, plan)
    ws.column_dimensions["J"].width = 40
    style.note(ws, 6, "Three rows, not one: a regression traces to the "
               "representation that changed. Weight-only quantization leaves bf16 KV unchanged, "
               "so long-context concurrency barely moves once weights stop dominating.",
               last_col=len(HEADERS))
    if stored:
        write_formats(wb, ws, FORMATS_ROW, stored)
    page.finish(ws)


def _widths(ws, plan: Plan) -> None:
    """Metadata is at most the weights; bytes saved at most 3x the weights or the KV cache
    (int4 against bf16); a bf16 ceiling at most 4x the plan's (int4 KV): widths for those."""
    saved = 3 * max(plan.line("weights"), plan.line("kv_cache"))
    ceiling = 4 * plan.memory_ceiling_requests + 9
    for col, text in (("E", style.shown(plan.line("weights"), style.BYTES)),
                      ("F", style.shown(saved, style.BYTES)),
                      ("G", style.shown(ceiling, style.REQUESTS)),
                      ("H", style.shown(ceiling, style.REQUESTS)),
                      ("I", "+" + style.shown(ceiling, style.REQUESTS))):
        ws.column_dimensions[col].width = max(len(text) + 3, 12)
    for col, width in (("A", 17), ("B", 10), ("C", 17), ("D", 16)):  # A: "representation", bold
        ws.column_dimensions[col].width = width


FORMATS_ROW = 8
FORMAT_HEADERS = ("checkpoint format", "parameters", "stored [bits/param]", "values [bytes]",
                  "metadata [bytes]", "stored beside the values")


def write_formats(wb: Workbook, ws, first: int, formats: tuple) -> None:
    """One row per storage format (P_f, b_f and its metadata are inputs; the values a formula)
    and their total, named format_weights_bytes / format_metadata_bytes: the Ledger's weights
    line is ceil(Σ_f P_f x b_f / 8), as ledger.weights.weight_bytes rounds it."""
    for col, text in enumerate(FORMAT_HEADERS, 1):
        style.header_cell(ws.cell(row=first, column=col, value=text))
    top, last = first + 1, first + len(formats)
    for r, share in enumerate(formats, start=top):
        for col, (value, fmt) in enumerate(((share.name, None),
                                            (share.num_parameters, style.PARAMS),
                                            (share.bits, style.BITS),
                                            (f"=ROUNDUP(B{r}*C{r}/8,0)", style.BYTES),
                                            (share.metadata_bytes, style.BYTES),
                                            (share.scales or "none", None)), 1):
            style.as_formula(ws.cell(row=r, column=col, value=value), fmt)
    total = last + 1
    for col, (value, fmt) in enumerate((("all formats", None), (f"=SUM(B{top}:B{last})",
                                        style.PARAMS), (None, None),
                                        (f"=ROUNDUP(SUMPRODUCT(B{top}:B{last},C{top}:C{last})"
                                         "/8,0)", style.BYTES),
                                        (f"=SUM(E{top}:E{last})", style.BYTES)), 1):
        style.as_formula(ws.cell(row=total, column=col, value=value), fmt)
    define(wb, "format_weights_bytes", SHEET, f"D{total}")
    define(wb, "format_metadata_bytes", SHEET, f"E{total}")
    _fit(ws, formats)


def _fit(ws, stored: tuple) -> None:
    """Columns wide enough for the table's longest name and largest numbers (a printed number
    never turns to ###)."""
    params = sum(s.num_parameters for s in stored)
    values = sum(s.value_bytes for s in stored) + len(stored)
    for col, text in (("A", max((s.name for s in stored), key=len)),
                      ("B", style.shown(params, style.PARAMS)),
                      ("D", style.shown(values, style.BYTES)),
                      ("E", style.shown(sum(s.metadata_bytes for s in stored), style.BYTES))):
        width = ws.column_dimensions[col].width or 8
        ws.column_dimensions[col].width = max(width, min(len(text) + 3, 32))
