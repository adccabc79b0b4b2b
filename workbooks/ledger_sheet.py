"""The Ledger sheet: each ledger line a formula over the named inputs, in bytes and GiB."""

from openpyxl.workbook.workbook import Workbook

from servecap.ledger import dtypes
from servecap.ledger.kv import WHOLE, kv_bits_for_layer, kv_bits_per_token_layer
from servecap.ledger.paging import blocks_for
from servecap.ledger.plan import Plan
from servecap.ledger.state import state_bytes_per_layer

from . import charts, page, style
from .cached import remember
from .encoder_rows import CACHE_LINE, PROFILE_LINE
from .eplb_rows import LINE as EPLB_LINE
from .formulas import (
    INDEXER_LAYER_BYTES,
    Kinds,
    ceiling,
    full_layer_bits,
    kv_per_token,
    kv_request,
    per_layer_bits,
    shared_prefix_kv,
    slots,
    state_layer_bytes,
    weights_computed,
)
from .geometry import representative
from .kv_offload_rows import ROWS as OFFLOAD_ROWS
from .kv_offload_rows import deployed as offload_deployed
from .kv_offload_rows import known as offload_known
from .lora_rows import LINE as LORA_LINE
from .names import define
from .source import WorkbookSource, cache_bytes_per_request, weight_split

SHEET = "Ledger"

# (defined name, label, formula, meaning, line key); names are the workbook's contract.
HEAD = (
    ("weights_bytes", "weights",
     f"=IF(declared_weights_bytes>0,declared_weights_bytes,{weights_computed()})",
     "ceil((P_q x b_q + (P - P_q) x b_dense) / 8); or the bytes the safetensors headers state",
     "weights"),
    ("weight_metadata_line_bytes", "weight metadata", "=weight_metadata_bytes",
     "M_metadata: scales / zero points, kept apart from the values", "weight_metadata"),
    ("runtime_peak_line_bytes", "runtime peak", "=runtime_peak_bytes",
     "M_runtime,peak at the deployed batch shape (declared or estimated)", "runtime_peak"),
)
SAFETY = ("safety_line_bytes", "safety reserve", "=safety_bytes",
          "M_safety: deliberate capacity, not waste", "safety")
EXTRA_LINES = {LORA_LINE[0]: LORA_LINE, EPLB_LINE[0]: EPLB_LINE}  # in the plan's order
# after the runtime peak, as the plan lists them
AFTER_RUNTIME = {CACHE_LINE[0]: CACHE_LINE, PROFILE_LINE[0]: PROFILE_LINE}
SLOTS_IN_USE = f"SUMPRODUCT(load_requests,{slots('load_lengths_tokens')})"


FROM_FORMATS = ("weights_bytes", "weights",
                "=IF(declared_weights_bytes>0,declared_weights_bytes,format_weights_bytes)",
                "ceil(Σ_f P_f x b_f / 8) over the checkpoint's formats (Quantization); or the "
                "bytes the safetensors headers state", "weights")


def lines(kinds: Kinds, formats: bool = False) -> list[tuple[str, str, str, str, str]]:
    """The plan's lines in its order: the caches (KV, indexer K, fixed states) before safety;
    with `formats`, the weights summed over the Quantization sheet's per-format rows."""
    head = (FROM_FORMATS, *HEAD[1:]) if formats else HEAD
    out = [*head[:2], *(EXTRA_LINES[name] for name in kinds.extras if name in EXTRA_LINES),
           head[2], *(AFTER_RUNTIME[name] for name in kinds.extras if name in AFTER_RUNTIME), (
        "kv_cache_bytes", "KV cache in use",
        "=SUMPRODUCT(load_requests,load_kv_bytes)-IF(AND(shared_prefix_slot_tokens>0,"
        f"requests>1),{shared_prefix_kv(kinds)}*(requests-1),0)",
        "Σ_r paged KV of each live request; a shared prefix's full blocks stored once",
        "kv_cache")]
    if kinds.indexer:
        out.append(("indexer_cache_bytes", "indexer K cache in use",
                    f"={SLOTS_IN_USE}*indexer_bytes_per_token",
                    "Σ_r ceil(S_r/B) x B slots x indexer K per token (never shared)",
                    "indexer_cache"))
    if kinds.state:
        out.append(("state_cache_bytes", "fixed state in use",
                    "=requests*state_bytes_per_request",
                    "N x one request's states: constant in context", "state_cache"))
    return [*out, SAFETY]


def totals(last_line_row: int) -> tuple:
    return (
        ("committed_bytes", "committed + reserved", f"=SUM(C2:C{last_line_row})", style.BYTES,
         "sum of the lines above"),
        ("device_line_bytes", "device", "=device_bytes", style.BYTES, "M_device"),
        ("free_bytes", "left", "=device_bytes-committed_bytes", style.BYTES,
         "device - committed (negative: the declared load does not fit)"),
    )


def derived(kinds: Kinds) -> list[tuple]:
    """KV per token and request, the indexer and state per request, and the ceiling."""
    rows = [
        ("kv_bits_per_element", "KV width", "=VLOOKUP(kv_dtype,dtype_bits,2,FALSE)", style.BITS,
         "b_kv of kv_dtype, from the width table on Inputs"),
        ("kv_bits_per_token_layer", "KV per token per layer",
         "=" + per_layer_bits(named=False, kinds=kinds), style.BITS,
         ("GQA: H_kv x (d_k + d_v) x b_kv" if kinds.v_shape else
          "GQA: 2 [K,V] x H_kv x d_h x b_kv") + "; MLA: (kv_lora_rank + rope dim) x b_kv"
         + ("; sliding and chunked layers" if kinds.full_shape else ""))]
    if kinds.full_shape:
        rows.append(("kv_bits_per_token_full_layer", "KV per token per full layer",
                     "=" + full_layer_bits(kinds, named=False), style.BITS,
                     ("full_kv_heads x (full_head_dim + full_v_head_dim)" if kinds.v_shape
                      else "2 x full_kv_heads x full_head_dim") + " x b_kv: full layers' own "
                     "shape"))
    rows += [
        ("kv_bytes_per_token", "KV per token", "=" + kv_per_token(kinds), style.BYTES,
         "2 x L x H_kv x d_h x b_kv (seed 000), whole bytes"
         + ("; over the layers that hold KV" if kinds.hybrid else "")),
        ("shared_prefix_slot_tokens", "shared prefix, full blocks",
         "=INT(MIN(shared_prefix_tokens,MIN(load_lengths_tokens))/block_size_tokens)"
         "*block_size_tokens", style.TOKENS,
         "floor(min(prefix, shortest request) / B) x B: the partial block stays private"),
        ("kv_bytes_per_request", "KV per request",
         "=IF(explicit_lengths,ROUNDUP(kv_cache_bytes/requests,0),"
         + kv_request("context_tokens", kinds=kinds) + ")", style.BYTES,
         "Σ layers ceil(S/B) x B slots x bytes/slot (sliding layers: the prefill in flight, "
         "W - 1 + T tokens + 1 block at most" + ("; chunked: min(S, C)" if kinds.chunked else "")
         + "); mixed: mean, up"),
        ("indexer_bytes_per_token", "indexer K per token",
         f"=num_layers*{INDEXER_LAYER_BYTES}" if kinds.indexer else "=0", style.BYTES,
         "L x (index_head_dim fp8 + an fp32 scale per 128)" if kinds.indexer
         else "no sparse-attention indexer: 0")]
    if kinds.indexer:
        rows.append(("indexer_bytes_per_request", "indexer K per request",
                     f"={slots('context_tokens')}*indexer_bytes_per_token", style.BYTES,
                     "ceil(S/B) x B slots x indexer K per token"))
    if kinds.state:
        rows.append(("state_bytes_per_layer", "fixed state per layer",
                     "=" + state_layer_bytes(), style.BYTES,
                     "conv (kernel - 1) x conv_dim x b_conv + heads x elements x b_ssm"))
    rows += [
        ("state_bytes_per_request", "fixed state per request",
         "=num_state_layers*state_bytes_per_layer" if kinds.state else "=0", style.BYTES,
         "state layers x one layer's state: constant in context" if kinds.state
         else "no linear-attention or Mamba-2 layers: 0"),
        ("cache_bytes_per_request", "cache per request", "=" + _cache_request(kinds),
         style.BYTES, "KV + indexer K + fixed state of one request: what the ceiling divides by"),
        ("fixed_bytes", "fixed lines",
         "=weights_bytes+weight_metadata_bytes+runtime_peak_bytes+safety_bytes"
         + "".join(f"+{name}" for name in kinds.extras), style.BYTES,
         "everything but the caches"),
        ("memory_ceiling_requests", "memory-only ceiling",
         ceiling("device_bytes", "safety_bytes", "weights_bytes", "cache_bytes_per_request",
                 kinds),
         style.REQUESTS,
         "MAX(0, FLOOR((device - weights - metadata - runtime - safety) / cache per request))"),
        ("fits", "declared load fits", "=free_bytes>=0", style.BOOL, "TRUE when left >= 0"),
    ]
    return rows


def _cache_request(kinds: Kinds) -> str:
    """One request's caches; with mixed lengths the mean of the lines in use, rounded up."""
    if not (kinds.indexer or kinds.state):
        return "kv_bytes_per_request"
    names = [name for name, on in (("indexer", kinds.indexer), ("state", kinds.state)) if on]
    in_use = "+".join(["kv_cache_bytes"] + [f"{n}_cache_bytes" for n in names])
    one = "+".join(["kv_bytes_per_request"] + [f"{n}_bytes_per_request" for n in names])
    return f"IF(explicit_lengths,ROUNDUP(({in_use})/requests,0),{one})"


def write_ledger(wb: Workbook, src: WorkbookSource) -> None:
    ws = wb.create_sheet(SHEET)
    style.header(ws, ["key", "ledger line", "bytes / value", "GiB (2^30)", "formula",
                      "from (servecap plan)"])
    plan, kinds = src.plan(), src.kinds
    known = known_values(src, plan)
    sources = {line.key: line.source for line in plan.lines}
    items = lines(kinds, bool(weight_split(src).formats))
    row = 2
    for name, label, formula, meaning, key in items:
        _row(wb, ws, row, (name, label, formula, style.BYTES, meaning), key, sources[key], known)
        row += 1
    for item in totals(row - 1):
        _row(wb, ws, row, item, item[0], "", known)
        row += 1
    row += 1
    section = row
    style.section(ws, row, "caches and the memory-only ceiling", column=2)
    for item in derived(kinds):
        row += 1
        _row(wb, ws, row, item, item[0], "", known)
    if src.serve.kv_offload is not None:
        row += 2
        style.section(ws, row, "host memory (not a device line): the KV offload tier of one "
                      "deployed rank", column=2)
        known.update(offload_known(src))
        how = offload_deployed(src).how
        for item in OFFLOAD_ROWS:
            row += 1
            _row(wb, ws, row, item, item[0], how if item[0] == "kv_offload_bytes_per_rank"
                 else "", known)
    style.fit_columns(ws)
    for col in "EF":  # the formula's meaning and its source wrap in their columns
        ws.column_dimensions[col].width = TEXT_WIDTH
    # the chart stands in the "from" column beside the derived lines, which have no source,
    # and below them as far as its legend needs; a series per ledger line, the caches
    # included, then what is left: the column stacks to the device's usable GiB (left is
    # below zero when the load does not fit)
    left_row = 1 + len(items) + [item[0] for item in totals(0)].index("free_bytes") + 1
    page.fit_rows(ws)  # the rows' heights decide how many the chart spans
    block = charts.memory_breakdown(ws, 2, 1 + len(items), 2, 4, 4, 1,
                                    charts.Block(6, section, 6, row), "Memory on the device",
                                    keys=[*(item[-1] for item in items), "free_bytes"],
                                    also_rows=[left_row])
    if src.multi:
        style.note(ws, block.last_row + 2, "The whole model on one device with the plain "
                   "engine, for reference: the deployment's ledger, one column per rank, is on "
                   "Ranks.", last_col=6, column=2)
    # the key column is for scripts (the defined names say the same): the page starts at B
    page.finish(ws, one_page=True, areas=[page.used_range(ws, first_col=2)])


def line_rows(src: WorkbookSource) -> tuple[int, int]:
    """(first, last) row of the ledger lines: the Summary reads them by position."""
    return 2, 1 + len(lines(src.kinds))


TEXT_WIDTH = 40


def known_values(src: WorkbookSource, plan: Plan) -> dict[str, object]:
    """What each named line evaluates to: the plan's own numbers (cached beside the formulas)."""
    serve, spec = plan.serve, src.spec
    bits = dtypes.lookup(serve.kv_dtype, "kv_dtype").bits
    lengths = serve.live_lengths
    held = blocks_for(serve.context_tokens, serve.block_size_tokens) * serve.block_size_tokens
    full, layer = representative(spec, True), representative(spec, False)
    return {
        "weights_bytes": plan.line("weights"), "lora_line_bytes": plan.line("lora_adapters"),
        "eplb_line_bytes": plan.line("eplb"),
        "encoder_cache_line_bytes": plan.line("encoder_cache"),
        "encoder_profile_line_bytes": plan.line("encoder_profile"),
        "weight_metadata_line_bytes": plan.line("weight_metadata"),
        "runtime_peak_line_bytes": plan.line("runtime_peak"),
        "kv_cache_bytes": plan.line("kv_cache"), "safety_line_bytes": plan.line("safety"),
        "indexer_cache_bytes": plan.line("indexer_cache"),
        "state_cache_bytes": plan.line("state_cache"),
        "committed_bytes": plan.committed_bytes, "device_line_bytes": plan.device_bytes,
        "free_bytes": plan.free_bytes, "kv_bits_per_element": bits,
        "kv_bits_per_token_layer": kv_bits_for_layer(spec, layer, bits, WHOLE)
        if layer is not None else kv_bits_per_token_layer(spec, bits),
        "kv_bits_per_token_full_layer": kv_bits_for_layer(spec, full, bits, WHOLE)
        if full is not None else None,
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "shared_prefix_slot_tokens": min(serve.shared_prefix_tokens, *lengths)
        // serve.block_size_tokens * serve.block_size_tokens,
        "kv_bytes_per_request": plan.kv_bytes_per_request, "fixed_bytes": plan.fixed_bytes,
        "indexer_bytes_per_token": plan.indexer_bytes_per_token,
        "indexer_bytes_per_request": held * plan.indexer_bytes_per_token,
        "state_bytes_per_layer": state_bytes_per_layer(spec.state) if spec.state else None,
        "state_bytes_per_request": plan.state_bytes_per_request,
        "cache_bytes_per_request": cache_bytes_per_request(plan),
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
