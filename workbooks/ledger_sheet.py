"""The Ledger sheet: each ledger line a formula over the named inputs, in bytes and GiB."""

from openpyxl.workbook.workbook import Workbook

from servecap.ledger import dtypes
from servecap.ledger.kv import kv_bits_per_token_layer
from servecap.ledger.plan import Plan

from . import charts, page, style
from .cached import remember
from .formulas import ceiling, kv_request, weights_computed
from .names import define
from .source import WorkbookSource

SHEET = "Ledger"
FULL = "(num_layers-num_sliding_layers)"

# (defined name, label, formula, number format, meaning); names are the workbook's contract.
LINES = (
    ("weights_bytes", "weights",
     f"=IF(declared_weights_bytes>0,declared_weights_bytes,{weights_computed()})",
     "ceil((P_q x b_q + (P - P_q) x b_dense) / 8); or the bytes the safetensors headers state"),
    ("weight_metadata_line_bytes", "weight metadata", "=weight_metadata_bytes",
     "M_metadata: scales / zero points, kept apart from the values"),
    ("runtime_peak_line_bytes", "runtime peak", "=runtime_peak_bytes",
     "M_runtime,peak at the deployed batch shape (declared or estimated)"),
    ("kv_cache_bytes", "KV cache in use",
     "=SUMPRODUCT(load_requests,load_kv_bytes)-IF(AND(shared_prefix_slot_tokens>0,requests>1),"
     f"ROUNDUP({FULL}*shared_prefix_slot_tokens*kv_bits_per_token_layer/8,0)*(requests-1),0)",
     "Σ_r paged KV of each live request; a shared prefix's full blocks stored once"),
    ("safety_line_bytes", "safety reserve", "=safety_bytes",
     "M_safety: deliberate capacity, not waste"),
)
TOTALS = (
    ("committed_bytes", "committed + reserved", "=SUM(C2:C6)", style.BYTES,
     "sum of the lines above"),
    ("device_line_bytes", "device", "=device_bytes", style.BYTES, "M_device"),
    ("free_bytes", "left", "=device_bytes-committed_bytes", style.BYTES,
     "device - committed (negative: the declared load does not fit)"),
)
DERIVED = (
    ("kv_bits_per_element", "KV width", "=VLOOKUP(kv_dtype,dtype_bits,2,FALSE)", style.BITS,
     "b_kv of kv_dtype, from the width table on Inputs"),
    ("kv_bits_per_token_layer", "KV per token per layer",
     '=IF(attention_kind="mla",(kv_lora_rank+qk_rope_head_dim)*kv_bits_per_element,'
     "2*num_kv_heads*head_dim*kv_bits_per_element)", style.BITS,
     "GQA: 2 [K,V] x H_kv x d_h x b_kv; MLA: (kv_lora_rank + rope dim) x b_kv"),
    ("kv_bytes_per_token", "KV per token", "=ROUNDUP(num_layers*kv_bits_per_token_layer/8,0)",
     style.BYTES, "2 x L x H_kv x d_h x b_kv (seed 000), whole bytes"),
    ("shared_prefix_slot_tokens", "shared prefix, full blocks",
     "=INT(MIN(shared_prefix_tokens,MIN(load_lengths_tokens))/block_size_tokens)"
     "*block_size_tokens", style.TOKENS,
     "floor(min(prefix, shortest request) / B) x B: the partial block stays private"),
    ("kv_bytes_per_request", "KV per request",
     "=IF(explicit_lengths,ROUNDUP(kv_cache_bytes/requests,0)," + kv_request("context_tokens")
     + ")", style.BYTES,
     "Σ layers ceil(S/B) x B slots x bytes/slot (sliding layers: the prefill in flight, "
     "W - 1 + T tokens + 1 block at most); mixed: mean, up"),
    ("fixed_bytes", "fixed lines",
     "=weights_bytes+weight_metadata_bytes+runtime_peak_bytes+safety_bytes", style.BYTES,
     "everything but the KV cache"),
    ("memory_ceiling_requests", "memory-only ceiling",
     ceiling("device_bytes", "safety_bytes", "weights_bytes", "kv_bytes_per_request"),
     style.REQUESTS,
     "MAX(0, FLOOR((device - weights - metadata - runtime - safety) / KV per request))"),
    ("fits", "declared load fits", "=free_bytes>=0", style.BOOL, "TRUE when left >= 0"),
)


def write_ledger(wb: Workbook, src: WorkbookSource) -> None:
    ws = wb.create_sheet(SHEET)
    style.header(ws, ["key", "ledger line", "bytes / value", "GiB (2^30)", "formula",
                      "from (servecap plan)"])
    plan = src.plan()
    known = known_values(src, plan)
    sources = {line.key: line.source for line in plan.lines}
    keys = ("weights", "weight_metadata", "runtime_peak", "kv_cache", "safety")
    row = 2
    for (name, label, formula, meaning), key in zip(LINES, keys, strict=True):
        _row(wb, ws, row, (name, label, formula, style.BYTES, meaning), key, sources[key], known)
        row += 1
    for item in TOTALS:
        _row(wb, ws, row, item, item[0], "", known)
        row += 1
    row += 1
    section = row
    style.section(ws, row, "KV cache and the memory-only ceiling", column=2)
    for item in DERIVED:
        row += 1
        _row(wb, ws, row, item, item[0], "", known)
    if src.multi:
        style.note(ws, row + 2, "The whole model on one device with the plain engine, for "
                   "reference: the deployment's ledger, one column per rank, is on Ranks.",
                   last_col=6, column=2)
    style.fit_columns(ws)
    for col in "EF":  # the formula's meaning and its source wrap in their columns
        ws.column_dimensions[col].width = TEXT_WIDTH
    # the chart stands in the "from" column beside the derived lines, which have no source
    charts.memory_breakdown(ws, 2, 6, 2, 4, 4, 1, charts.Block(6, section, 6, row),
                            "Memory on the device", keys=keys)
    # the key column is for scripts (the defined names say the same): the page starts at B
    page.finish(ws, one_page=True, areas=[page.used_range(ws, first_col=2)])


TEXT_WIDTH = 40


def known_values(src: WorkbookSource, plan: Plan) -> dict[str, object]:
    """What each named line evaluates to: the plan's own numbers (cached beside the formulas)."""
    serve = plan.serve
    bits = dtypes.lookup(serve.kv_dtype, "kv_dtype").bits
    lengths = serve.live_lengths
    return {
        "weights_bytes": plan.line("weights"),
        "weight_metadata_line_bytes": plan.line("weight_metadata"),
        "runtime_peak_line_bytes": plan.line("runtime_peak"),
        "kv_cache_bytes": plan.line("kv_cache"), "safety_line_bytes": plan.line("safety"),
        "committed_bytes": plan.committed_bytes, "device_line_bytes": plan.device_bytes,
        "free_bytes": plan.free_bytes, "kv_bits_per_element": bits,
        "kv_bits_per_token_layer": kv_bits_per_token_layer(src.spec, bits),
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "shared_prefix_slot_tokens": min(serve.shared_prefix_tokens, *lengths)
        // serve.block_size_tokens * serve.block_size_tokens,
        "kv_bytes_per_request": plan.kv_bytes_per_request, "fixed_bytes": plan.fixed_bytes,
        "memory_ceiling_requests": plan.memory_ceiling_requests, "fits": plan.fits,
    }


def _row(wb: Workbook, ws, row: int, item: tuple, key: str, source: str,
         known: dict[str, object]) -> None:
    name, label, formula, number_format, meaning = item
    ws.cell(row=row, column=1, value=key)
    ws.cell(row=row, column=2, value=label)
    style.as_formula(ws.cell(row=row, column=3, value=formula), number_format)
    remember(ws, f"C{row}", known.get(name))
    if number_format == style.BYTES:
        style.as_formula(ws.cell(row=row, column=4, value=f"=C{row}/2^30"), style.GIB)
        remember(ws, f"D{row}", None if name not in known else known[name] / 2**30)
    ws.cell(row=row, column=5, value=meaning).alignment = style.TEXT_BESIDE_NUMBER
    style.text(ws, row, 6, source).alignment = style.TEXT_BESIDE_NUMBER
    define(wb, name, SHEET, f"C{row}")
