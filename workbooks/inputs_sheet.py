"""The Inputs sheet: every input in its own named cell, the live-length table and dtype widths."""

from dataclasses import dataclass

from openpyxl.workbook.workbook import Workbook

from servecap.ledger import dtypes
from servecap.ledger.kv import WHOLE, kv_bytes_per_request
from servecap.ledger.model import CHUNKED, FULL
from servecap.ledger.serve import DEFAULT_SAFETY_FRACTION
from servecap.ledger.state import STATE_DTYPES

from . import page, style
from .cached import remember
from .deploy_inputs import deploy_rows
from .encoder_rows import encoder_inputs, encoder_settings
from .eplb_rows import eplb_inputs, eplb_settings
from .formulas import kinds_of, kv_request
from .geometry import KindShape, caching_layers, default_shape, full_shape
from .kv_offload_rows import offload_inputs
from .lora_rows import lora_inputs, lora_settings
from .names import define
from .release_inputs import state_rule_rows, window_row
from .source import (
    WorkbookSource,
    load_runs,
    num_sliding_layers,
    runtime_rule,
    safety_rule,
    weight_split,
)

SHEET = "Inputs"
SETTINGS = "plan settings: replayed by servecap plan --from-workbook"
WHAT_IF = "deployment: change these to ask 'what if'"
LOAD_COLUMNS = ("F", "G", "H")  # live length, requests of that length, KV bytes per request
DTYPE_COLUMNS = ("J", "K")


@dataclass(frozen=True)
class InputRow:
    name: str
    value: object
    number_format: str | None
    unit: str
    meaning: str
    model_derived: bool = False


def model_rows(src: WorkbookSource) -> list[InputRow]:
    """Inputs that come from the model file: --from-workbook checks them, it does not apply them."""
    spec, split, att = src.spec, weight_split(src), src.spec.attention
    shape = KindShape(att.num_kv_heads, att.head_dim, att.head_dim) if att.kind == "mla" \
        else default_shape(spec)
    rows = [
        ("num_parameters", split.num_parameters, style.PARAMS, "params",
         "P: every stored parameter (M_weights = P x b_w + M_metadata)"),
        ("quantized_parameters", split.quantized_parameters, style.PARAMS, "params",
         "of P, the matmul weights stored at the quantized width"),
        ("quantized_bits_per_parameter", split.quantized_bits, style.BITS, "bits/param",
         "b_w of the quantized parameters (bits: 4-bit is half a byte)"),
        ("dense_bits_per_parameter", split.dense_bits, style.BITS, "bits/param",
         "b_w of the rest (embeddings, norms, lm_head)"),
        ("weight_metadata_bytes", split.metadata_bytes, style.BYTES, "bytes",
         "M_metadata: quantization scales, zero points, packing extras"),
        ("declared_weights_bytes", split.declared_bytes, style.BYTES, "bytes",
         "weights read from safetensors headers; 0 = compute from P and b_w"),
        ("num_layers", spec.num_layers, style.LAYERS, "layers", "L: decoder layers"),
        ("num_sliding_layers", num_sliding_layers(spec), style.LAYERS, "layers",
         "of L, layers with a sliding attention window"),
        ("sliding_window_tokens", att.sliding_window_tokens or 0, style.TOKENS, "tokens",
         "W: tokens a sliding layer keeps (0 = no window)"),
        ("attention_kind", "gqa" if att.mla_per_head_cache else att.kind, None, "text",
         "gqa (also MHA, MQA) or mla (latent KV)" + (
             "; MLA run as multi-head attention: K and V per head (vLLM before 0.7.1)"
             if att.mla_per_head_cache else "")),
        ("num_kv_heads", shape.kv_heads, style.HEADS, "heads/layer", "H_kv: KV heads"),
        ("head_dim", shape.k_dim, style.ELEMENTS, "elements/head", "d_h"),
        ("kv_lora_rank", att.kv_lora_rank, style.ELEMENTS, "elements", "MLA latent width"),
        ("qk_rope_head_dim", att.qk_rope_head_dim, style.ELEMENTS, "elements",
         "MLA decoupled RoPE key width"),
        window_row(src),
    ]
    return [InputRow(*row, model_derived=True) for row in rows + hybrid_rows(src)]


HYBRID_NAMES = ("num_full_layers", "num_chunked_layers", "chunk_size_tokens", "full_kv_heads",
                "full_head_dim", "v_head_dim", "full_v_head_dim", "indexer_head_dim",
                "num_state_layers", "state_conv_kernel", "state_conv_dim",
                "state_recurrent_heads", "state_head_elements", "state_n_groups", "state_d_state",
                "state_intermediate", "state_conv_dtype", "state_ssm_dtype", "mamba_cache_mode",
                "state_checkpoint_alignment", "state_checkpoint_pages", "mamba_all_chunk_aligned")


def hybrid_rows(src: WorkbookSource) -> list[tuple]:
    """The shapes of chunked-local, per-layer-type, indexer and state layers, where the model
    has them (the formulas name only these cells)."""
    spec, kinds, att = src.spec, kinds_of(src.spec), src.spec.attention
    rows = []
    if kinds.hybrid:
        rows.append(("num_full_layers", _count(spec, FULL), style.LAYERS, "layers",
                     "of L, full-attention layers (every token's KV)"))
    if kinds.chunked:
        rows += [("num_chunked_layers", _count(spec, CHUNKED), style.LAYERS, "layers",
                  "of L, chunked local attention layers (Llama-4)"),
                 ("chunk_size_tokens", att.chunk_size_tokens, style.TOKENS, "tokens",
                  "C: a chunked layer attends within its chunk")]
    if kinds.v_shape:
        rows.append(("v_head_dim", default_shape(spec).v_dim, style.ELEMENTS, "elements/head",
                     "d_v: V's head size where it differs from K's (MiMo-V2: 128 beside 192)"))
    if kinds.full_shape:
        full = full_shape(spec) or KindShape(*att.shape(FULL), att.shape(FULL)[1])
        rows += [("full_kv_heads", full.kv_heads, style.HEADS, "heads/layer",
                  "KV heads of the full-attention layers"),
                 ("full_head_dim", full.k_dim, style.ELEMENTS, "elements/head",
                  "head size of the full-attention layers (Gemma-4: 512)")]
        if kinds.v_shape:
            rows.append(("full_v_head_dim", full.v_dim, style.ELEMENTS, "elements/head",
                         "V's head size in the full-attention layers"))
    if kinds.indexer:
        rows.append(("indexer_head_dim", att.indexer_head_dim, style.ELEMENTS, "elements",
                     "sparse-attention indexer: one K of this size per token and layer"))
    return rows + (state_rows(src) if kinds.state else [])


def state_rows(src: WorkbookSource) -> list[tuple]:
    """One state layer as vLLM keeps it (ledger.model.StateShape), vLLM's cache mode and the
    release's paging rules for it (workbooks/release_inputs.py)."""
    spec, state = src.spec, src.spec.state
    heads_elements = state.recurrent_shape[0] * state.recurrent_shape[1]
    return [
        ("num_state_layers", len(spec.state_layers), style.LAYERS, "layers",
         f"layers with a fixed state per request ({state.kind}"
         + (", beside each layer's attention" if spec.parallel_state else "") + ")"),
        ("state_conv_kernel", state.conv_kernel, style.COUNT, "positions",
         "conv kernel: the conv state keeps kernel - 1 positions"),
        ("state_conv_dim", state.conv_dim, style.ELEMENTS, "elements", "conv state width"),
        ("state_recurrent_heads", state.recurrent_heads, style.HEADS, "heads",
         "recurrent state heads (split by tensor parallelism)"),
        ("state_head_elements", heads_elements, style.ELEMENTS, "elements/head",
         f"recurrent state per head: {state.recurrent_shape[0]} x {state.recurrent_shape[1]}"),
        ("state_n_groups", state.n_groups, style.COUNT, "groups",
         "Mamba-2 B/C groups, replicated when tp does not divide them (0: none)"),
        ("state_d_state", state.d_state, style.ELEMENTS, "elements", "Mamba-2 state size"),
        ("state_intermediate", state.intermediate, style.ELEMENTS, "elements",
         "Mamba-2 intermediate width (conv_dim = it + 2 groups x d_state)"),
        ("state_conv_dtype", _state_dtype(state.conv_dtype), None, "dtype",
         "conv state element type (the width table)"),
        ("state_ssm_dtype", _state_dtype(state.ssm_dtype), None, "dtype",
         "recurrent state element type"),
        ("mamba_cache_mode", src.serve.mamba_cache_mode, None, "text",
         "vLLM's: align (prefix caching, its default) keeps 2 state pages a request; none 1; "
         "all one per block"),
        *state_rule_rows(src),
    ]


def _count(spec, kind: str) -> int:
    """Layers of `kind` that keep their own KV (not a no-op block, not a KV-sharing layer)."""
    return len(caching_layers(spec, kind))


def _state_dtype(name: str) -> str:
    return dtypes.lookup(name, "state dtype", STATE_DTYPES).name


def serve_rows(src: WorkbookSource) -> list[InputRow]:
    """The deployment: what a reviewer changes to ask 'what if'."""
    serve = src.serve
    fraction = {"default": DEFAULT_SAFETY_FRACTION, "fraction": serve.safety_fraction,
                "bytes": None}[safety_rule(serve)]
    rows = [
        ("device_bytes", serve.device_bytes, style.BYTES, "bytes", "M_device: usable bytes"),
        ("context_tokens", _load_formula("MAX", "F", serve), style.TOKENS, "tokens/request",
         "S: prompt + output tokens per request"),
        ("requests", _load_formula("SUM", "G", serve), style.REQUESTS, "requests",
         "N: resident requests"),
        ("block_size_tokens", serve.block_size_tokens, style.TOKENS, "tokens/block",
         "B: paged KV block size"),
        ("shared_prefix_tokens", serve.shared_prefix_tokens, style.TOKENS, "tokens",
         "prompt prefix shared by every request (full blocks stored once)"),
        ("kv_dtype", serve.kv_dtype, None, "dtype", "KV cache element type (see the width table)"),
        ("runtime_peak_bytes", src.plan().line("runtime_peak"), style.BYTES, "bytes",
         "M_runtime,peak: activations, workspaces, graphs"),
        ("runtime_peak_rule", runtime_rule(serve), None, "text",
         "estimate (servecap's, labelled) or declared (measured)"),
        ("safety_bytes", src.plan().line("safety"), style.BYTES, "bytes", "M_safety reserve"),
        ("safety_rule", safety_rule(serve), None, "text",
         "default (10% of the device), fraction (a declared share) or bytes"),
        ("safety_fraction", fraction, style.FRACTION, "share of device",
         "the share that scales the reserve on other devices (Envelope)"),
    ]
    return [InputRow(*row) for row in rows + lora_inputs(src) + eplb_inputs(src)
            + offload_inputs(src) + encoder_inputs(src)]


def setting_rows(src: WorkbookSource) -> list[InputRow]:
    """Plan settings that are not formula inputs but make --from-workbook the same plan."""
    serve = src.serve
    rows = [
        ("model", src.model_ref, None, "text", src.spec.source),
        ("device_label", serve.device_label, None, "text", "as given to --device"),
        ("explicit_lengths", bool(serve.lengths), style.BOOL, "TRUE/FALSE",
         "TRUE: the live-length table is the load (--lengths); FALSE: N x S"),
        ("weight_dtype", serve.weight_dtype, None, "dtype", "weights as planned"),
        ("weight_dtype_flag", src.weight_dtype_flag or "", None, "dtype",
         "blank = the checkpoint's own format"),
        ("group_size", src.group_size, style.COUNT, "elements/group", "--group-size for int4"),
        ("activation_dtype", serve.activation_dtype, None, "dtype", "activations"),
        ("max_num_batched_tokens", serve.max_num_batched_tokens, style.TOKENS, "tokens",
         "tokens per forward pass (sizes the runtime-peak estimate)"),
        ("max_num_seqs", serve.max_num_seqs, style.COUNT, "sequences", "logit rows"),
    ]
    return [InputRow(*row) for row in rows + lora_settings(src) + eplb_settings(src)
            + encoder_settings(src)]


def _load_formula(func: str, column: str, serve) -> object:
    """With explicit lengths S and N follow the live-length table; otherwise they are inputs."""
    if not serve.lengths:
        return serve.context_tokens if func == "MAX" else serve.concurrency
    return f"={func}(load_{'lengths_tokens' if column == 'F' else 'requests'})"


def write_inputs(wb: Workbook, src: WorkbookSource) -> None:
    ws = wb.create_sheet(SHEET)
    known = {"context_tokens": src.serve.context_tokens, "requests": src.serve.concurrency,
             "window_in_flight_tokens": src.resolved().plan.window_in_flight_tokens}
    style.header(ws, ["input (defined name)", "value", "unit", "meaning / source"])
    row = 2
    for title, rows in (("model: architecture and weights (from the model file)", model_rows(src)),
                        (WHAT_IF, serve_rows(src)),
                        (SETTINGS,
                         setting_rows(src)),
                        ("deployment: GPUs and engine (the Ranks sheet), replayed too",
                         [InputRow(*row) for row in deploy_rows(src)])):
        # the formula inputs on page one, the replayed settings next; a hybrid's longer model
        # section takes page one, its what-if inputs the next, whole
        if title == SETTINGS or (title == WHAT_IF and hybrid_rows(src)):
            page.break_before(ws, row)
        style.section(ws, row, title)
        row += 1
        for item in rows:
            _write_row(wb, ws, row, item, known)
            row += 1
    last = row - 1
    _write_load(wb, ws, src)
    _write_dtypes(wb, ws)
    style.fit_columns(ws)
    ws.column_dimensions["D"].width = MEANING_WIDTH
    tables = max(len(load_runs(src.serve)), len(dtypes.WEIGHT_DTYPES)) + 1
    # two print ranges: the inputs, then the load and width tables on a page of their own
    page.finish(ws, areas=[f"A1:D{last}", f"{LOAD_COLUMNS[0]}1:{DTYPE_COLUMNS[-1]}{tables}"])


MEANING_WIDTH = 64


def _write_row(wb: Workbook, ws, row: int, item: InputRow, known: dict) -> None:
    ws.cell(row=row, column=1, value=item.name)
    is_formula = isinstance(item.value, str) and item.value.startswith("=") \
        and item.unit != "text"  # a text row holds a name or path from the input, never a formula
    cell = ws.cell(row=row, column=2, value=item.value) if is_formula else \
        style.text(ws, row, 2, item.value)
    (style.as_formula if is_formula else style.as_input)(cell, item.number_format)
    if is_formula:
        remember(ws, f"B{row}", known.get(item.name))
    if not is_formula and isinstance(item.value, str):
        cell.alignment = style.WRAP  # a long path or label wraps inside its column
    style.text(ws, row, 3, item.unit)
    style.text(ws, row, 4, item.meaning).alignment = style.WRAP
    define(wb, item.name, SHEET, f"B{row}")


def _write_load(wb: Workbook, ws, src: WorkbookSource) -> None:
    """Live lengths: one row per run; with no --lengths, one row of N requests of S tokens."""
    f, g, h = LOAD_COLUMNS
    for col, title in zip(LOAD_COLUMNS, ("live length [tokens]", "requests [count]",
                                         "KV per request [B]"), strict=True):
        ws[f"{col}1"] = title
        style.header_cell(ws[f"{col}1"])
    runs = load_runs(src.serve)
    explicit = bool(src.serve.lengths)
    for i, (length, count) in enumerate(runs, start=2):
        ws[f"{f}{i}"] = length if explicit else "=context_tokens"
        ws[f"{g}{i}"] = count if explicit else "=requests"
        for col, fmt in ((f, style.TOKENS), (g, style.REQUESTS)):
            (style.as_input if explicit else style.as_formula)(ws[f"{col}{i}"], fmt)
        ws[f"{h}{i}"] = "=" + kv_request(f"{f}{i}", kinds=kinds_of(src.spec))
        style.as_formula(ws[f"{h}{i}"], style.BYTES)
        bits = dtypes.lookup(src.serve.kv_dtype, "kv_dtype").bits
        remember(ws, f"{h}{i}", kv_bytes_per_request(src.spec, bits, length,
                                                     src.serve.block_size_tokens, WHOLE,
                                                     src.serve.max_num_batched_tokens))
        if not explicit:
            remember(ws, f"{f}{i}", length)
            remember(ws, f"{g}{i}", count)
    last = len(runs) + 1
    define(wb, "load_lengths_tokens", SHEET, f"{f}2:{f}{last}")
    define(wb, "load_requests", SHEET, f"{g}2:{g}{last}")
    define(wb, "load_kv_bytes", SHEET, f"{h}2:{h}{last}")


def _write_dtypes(wb: Workbook, ws) -> None:
    """Storage width of each KV/weight dtype, so a dtype name in a cell drives the formulas."""
    j, k = DTYPE_COLUMNS
    ws[f"{j}1"], ws[f"{k}1"] = "dtype", "width [bits/element]"
    for col in DTYPE_COLUMNS:
        style.header_cell(ws[f"{col}1"])
    names = dtypes.WEIGHT_DTYPES
    for i, name in enumerate(names, start=2):
        ws[f"{j}{i}"] = name
        ws[f"{k}{i}"] = dtypes.lookup(name, "dtype").bits
        style.as_input(ws[f"{k}{i}"], style.BITS)
    define(wb, "dtype_bits", SHEET, f"{j}2:{k}{len(names) + 1}")
