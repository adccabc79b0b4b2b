"""The Ranks sheet: one column per GPU of a replica, its ledger and engine budget as formulas.

The lines that come from the model's sharding (weights, runtime peak, buffers) are the plan's
per-rank values, styled as inputs; the KV cache, the engine's pool, blocks, concurrency, the
binding rank and the ceiling are formulas over them and the named inputs (ledger.ranks,
ledger.engines). `[key]` in a formula is this rank's cell of that row, `<key>` the whole row.
"""

import re

from openpyxl.utils import get_column_letter
from openpyxl.workbook.workbook import Workbook

from servecap.ledger.engines import PLAIN, SGLANG, TRTLLM, VLLM
from servecap.ledger.kv_blocks import kv_cache_groups, uniform_kinds
from servecap.ledger.model import SLIDING
from servecap.ledger.ranks import StagePlan

from . import charts, style
from .cached import remember
from .names import define
from .source import WorkbookSource

SHEET = "Ranks"
FIRST_COL = 3
FIXED = (("weights", "weights"), ("weight_metadata", "weight metadata"),
         ("runtime_peak", "runtime peak"), ("rotary_cache", "rotary cos/sin cache"),
         ("non_torch", "non-torch memory"), ("comm_buffers", "communication buffers"),
         ("cuda_graphs", "CUDA graph pool"))
BITS = ('IF(attention_kind="mla",(kv_lora_rank+qk_rope_head_dim)*kv_bits_per_element,'
        "2*[kv_heads]*head_dim*kv_bits_per_element)")
HELD = ("(load_lengths_tokens-(sliding_window_tokens>0)*(load_lengths_tokens>sliding_window_tokens)"
        "*(load_lengths_tokens-sliding_window_tokens))")
KV_IN_USE = (
    "SUMPRODUCT(load_requests,ROUNDUP(([layers]-[sliding_layers])*ROUNDUP(load_lengths_tokens"
    "/block_size_tokens,0)*block_size_tokens*[kv_bits_layer]/8,0)+ROUNDUP([sliding_layers]*"
    f"ROUNDUP({HELD}/block_size_tokens,0)*block_size_tokens*[kv_bits_layer]/8,0))"
    "-IF(AND(shared_prefix_slot_tokens>0,requests>1),ROUNDUP(([layers]-[sliding_layers])*"
    "shared_prefix_slot_tokens*[kv_bits_layer]/8,0)*(requests-1),0)")
HELD_ONE = ("IF(sliding_window_tokens>0,MIN(context_tokens,sliding_window_tokens),"
            "context_tokens)")
KV_REQUEST = (
    "ROUNDUP(([layers]-[sliding_layers])*ROUNDUP(context_tokens/block_size_tokens,0)"
    "*block_size_tokens*[kv_bits_layer]/8,0)+ROUNDUP([sliding_layers]*ROUNDUP("
    f"{HELD_ONE}/block_size_tokens,0)*block_size_tokens*[kv_bits_layer]/8,0)")
WEIGHTS = "([weights]+[weight_metadata]+[rotary_cache])"
POOL = {
    VLLM: ("IF(ISNUMBER(kv_cache_memory_bytes),kv_cache_memory_bytes,TRUNC(device_bytes*"
           f"gpu_memory_utilization-({WEIGHTS}+[runtime_peak]+[non_torch]+[cuda_graphs])))"),
    SGLANG: f"TRUNC([free_start]*mem_fraction_static)-{WEIGHTS}",
    TRTLLM: "TRUNC([free_start]*free_gpu_memory_fraction)",
}
HEADROOM = {
    VLLM: (f"IF(ISNUMBER(kv_cache_memory_bytes),device_bytes-{WEIGHTS}-[runtime_peak]-[non_torch]"
           "-[cuda_graphs]-[comm_buffers]-kv_cache_memory_bytes,device_bytes-TRUNC(device_bytes*"
           "gpu_memory_utilization)-[comm_buffers])"),
    SGLANG: ("[free_start]-TRUNC([free_start]*mem_fraction_static)-[runtime_peak]"
             "-[cuda_graphs]"),
    TRTLLM: "[free_start]-[pool]",
}
FREE_START = {
    SGLANG: "device_bytes-[non_torch]-[comm_buffers]",
    TRTLLM: f"device_bytes-{WEIGHTS}-[runtime_peak]-[non_torch]-[comm_buffers]-[cuda_graphs]",
}
SLIDING_BLOCKS = ("IF(sliding_window_tokens>0,ROUNDUP(MIN(sliding_window_tokens-1+"
                  "max_num_batched_tokens,context_tokens)/block_size_tokens,0)+1,"
                  "ROUNDUP(context_tokens/block_size_tokens,0))")


def _structure(src: WorkbookSource, item: StagePlan, rank: int) -> dict[str, object]:
    spec, stage = src.spec, item.stage
    groups = kv_cache_groups(uniform_kinds(spec.attention.layer_kinds, spec.num_layers))
    lines = {line.key: line.num_bytes for line in item.plan.lines}
    out = {"rank": rank, "stage": stage.index, "tp_rank": rank - item.ranks[0],
           "first_layer": stage.layers[0], "last_layer": stage.layers[-1],
           "layers": len(stage.layers),
           "sliding_layers": sum(spec.layer_kind(i) == SLIDING for i in stage.layers),
           "full_groups": groups.kinds.count("full") if src.engine.name == VLLM else 0,
           "sliding_groups": groups.kinds.count(SLIDING) if src.engine.name == VLLM else 0,
           "group_layers": groups.group_size_on(stage.layers)}
    out.update({key: lines.get(key, 0) for key, _ in FIXED})
    return out


def _rows(engine: str) -> list[tuple[str, str, str | None, str]]:
    """(key, label, number format, formula or '' for a value)."""
    vllm = engine == VLLM
    rows = [("kv_heads", "KV heads on this rank", style.HEADS,
             'IF(attention_kind="mla",0,ROUNDUP(num_kv_heads/tensor_parallel_size,0))'),
            ("kv_bits_layer", "KV per token per layer", style.BITS, BITS),
            ("kv_bytes_per_token", "KV per token", style.BYTES,
             "ROUNDUP([layers]*[kv_bits_layer]/8,0)"),
            ("kv_request_context", "KV per request at context", style.BYTES, KV_REQUEST),
            ("kv_cache", "KV cache in use", style.BYTES, KV_IN_USE),
            ("kv_bytes_per_request", "KV per request", style.BYTES,
             "IF(explicit_lengths,ROUNDUP([kv_cache]/requests,0),[kv_request_context])")]
    if engine == PLAIN:
        return rows + [
            ("safety", "safety reserve", style.BYTES, "safety_bytes"),
            ("committed", "committed + reserved", style.BYTES, "[fixed]+[kv_cache]+[safety]"),
            ("free", "left", style.BYTES, "device_bytes-[committed]"),
            ("free_own", "left (binding order)", style.BYTES, "[free]"),
            ("ceiling", "memory-only ceiling", style.REQUESTS,
             "IF([kv_bytes_per_request]>0,MAX(0,INT((device_bytes-[fixed]-[safety])/"
             "[kv_bytes_per_request])),0)"),
            ("order", "binding order (fewest first)", style.COUNT, "[ceiling]"),
            ("fits", "declared load fits", None, "[free]>=0")]
    if engine in FREE_START:
        rows.append(("free_start", "memory the engine sizes from", style.BYTES,
                     FREE_START[engine]))
    page = "block_size_tokens*INT([kv_bits_layer]/8)"
    rows += [
        ("pool", "KV pool as sized", style.BYTES, POOL[engine]),
        ("kv_pool_bytes", "KV pool", style.BYTES, "MAX([pool],0)"),
        ("headroom", "outside the engine budget", style.BYTES, HEADROOM[engine]),
        ("block_bytes", "bytes per block", style.BYTES,
         f"{page}*" + ("[group_layers]" if vllm else "[layers]")),
        ("own_blocks", "blocks this rank's pool fits", style.BLOCKS,
         f"IF(AND([kv_pool_bytes]>0,{page}>0,[group_layers]>0),INT(INT([kv_pool_bytes]/({page}))"
         "/[group_layers]),0)" if vllm else
         "IF([block_bytes]>0,INT([kv_pool_bytes]/[block_bytes]),0)"),
        ("num_gpu_blocks", "blocks (every rank: the fewest)", style.BLOCKS, "MIN(<own_blocks>)"),
        ("num_groups", "KV cache groups", style.COUNT,
         "[full_groups]+[sliding_groups]" if vllm else "1"),
        ("kv_cache_tokens", "KV cache tokens", style.TOKENS,
         "INT([num_gpu_blocks]/[num_groups])*block_size_tokens"),
        ("blocks_per_request", "blocks one request reserves", style.BLOCKS,
         "[full_groups]*ROUNDUP(context_tokens/block_size_tokens,0)+[sliding_groups]*"
         + SLIDING_BLOCKS if vllm else "ROUNDUP(context_tokens/block_size_tokens,0)"),
        ("max_concurrency", "max concurrency", "0.00",
         "IF([blocks_per_request]>0,[num_gpu_blocks]/[blocks_per_request],0)" if vllm
         else "[kv_cache_tokens]/context_tokens"),
        ("kv_pool_spare", "KV pool, unused blocks", style.BYTES,
         "MAX([num_gpu_blocks]*[block_bytes]-[kv_cache],0)"),
        ("safety", "headroom outside the engine budget", style.BYTES, "MAX([headroom],0)"),
        ("committed", "committed + reserved", style.BYTES,
         "[fixed]+[kv_cache]+[kv_pool_spare]+[safety]"),
        ("free", "left", style.BYTES, "device_bytes-[committed]"),
        ("free_own", "left at this rank's own blocks (binding order)", style.BYTES,
         "device_bytes-[fixed]-[kv_cache]-MAX([own_blocks]*[block_bytes]-[kv_cache],0)-[safety]"),
        ("ceiling", "max concurrency, whole requests", style.REQUESTS, "INT([max_concurrency])"),
        ("order", "binding order (fewest first)", style.BLOCKS, "[own_blocks]"),
        ("fits", "declared load fits", None,
         "AND([free]>=0,[kv_cache]<=[num_gpu_blocks]*[block_bytes])")]
    return rows


def _known(item: StagePlan, binding: bool) -> dict[str, object]:
    """The values the plan already holds for this rank's formula rows (cached beside them)."""
    plan, budget = item.plan, item.plan.budget
    out = {"kv_bytes_per_token": plan.kv_bytes_per_token, "kv_cache": plan.line("kv_cache"),
           "kv_bytes_per_request": plan.kv_bytes_per_request, "safety": plan.line("safety"),
           "committed": plan.committed_bytes, "free": plan.free_bytes,
           "ceiling": plan.memory_ceiling_requests, "fits": plan.fits, "binding": binding,
           "kv_pool_spare": plan.line("kv_pool_spare"),
           "fixed": plan.fixed_bytes - plan.line("safety")}
    if budget is not None:
        out.update(kv_pool_bytes=budget.kv_pool_bytes, num_gpu_blocks=budget.num_gpu_blocks,
                   kv_cache_tokens=budget.kv_cache_tokens, block_bytes=budget.block_bytes,
                   max_concurrency=float(budget.max_concurrency),
                   blocks_per_request=budget.blocks_per_request)
    return out


def write_ranks(wb: Workbook, src: WorkbookSource) -> None:
    dep = src.deployment
    ws = wb.create_sheet(SHEET)
    columns = [(item, rank) for item in dep.stages for rank in item.ranks]
    last = get_column_letter(FIRST_COL + len(columns) - 1)
    style.header(ws, ["key", "line"] + [f"rank {rank}" for _, rank in columns])
    at: dict[str, int] = {}
    values = [_structure(src, item, rank) for item, rank in columns]
    binding = dep.stages[dep.binding]
    known = [_known(item, item is binding) for item, _ in columns]
    row = 2
    for key in values[0]:
        at[key] = row
        _label(ws, row, key, dict(FIXED).get(key, key.replace("_", " ")))
        for i, data in enumerate(values):
            style.as_input(ws.cell(row=row, column=FIRST_COL + i, value=data[key]),
                           style.BYTES if key in dict(FIXED) else style.COUNT)
        row += 1
    at["fixed"] = row
    rows = [("fixed", "fixed lines", style.BYTES, "+".join(f"[{k}]" for k, _ in FIXED))]
    rows += _rows(src.engine.name)
    for key, label, fmt, formula in rows:
        at[key] = row
        _label(ws, row, key, label)
        for i in range(len(columns)):
            col = get_column_letter(FIRST_COL + i)
            cell = ws.cell(row=row, column=FIRST_COL + i, value="=" + _resolve(formula, col, at,
                                                                             last))
            style.as_formula(cell, fmt)
            remember(ws, cell.coordinate, known[i].get(key))
        define(wb, f"rank_{key}", SHEET, f"C{row}:{last}{row}")
        row += 1
    _binding(wb, ws, row + 1, at, last, known, dep)
    _breakdown(ws, ws.max_row + 2, at, values, known)
    style.fit_columns(ws)


BREAKDOWN = tuple(key for key, _ in FIXED) + ("kv_cache", "kv_pool_spare", "safety")


def _breakdown(ws, row: int, at: dict[str, int], values: list[dict], known: list[dict]) -> None:
    """Every line of each rank in GiB, and the stacked column chart over them."""
    style.section(ws, row, "memory breakdown per rank [GiB], charted below")
    keys = [key for key in BREAKDOWN if key in at]
    for offset, key in enumerate(keys, start=1):
        r = row + offset
        _label(ws, r, f"{key}_gib", ws.cell(row=at[key], column=2).value)
        for i, (data, cached) in enumerate(zip(values, known, strict=True)):
            col = get_column_letter(FIRST_COL + i)
            cell = ws.cell(row=r, column=FIRST_COL + i, value=f"={col}{at[key]}/2^30")
            style.as_formula(cell, style.GIB)
            amount = data.get(key, cached.get(key))
            remember(ws, cell.coordinate, None if amount is None else amount / 2**30)
    last_col = FIRST_COL + len(values) - 1
    define(ws.parent, "rank_breakdown_lines", SHEET, f"B{row + 1}:B{row + len(keys)}")
    define(ws.parent, "rank_breakdown_gib", SHEET,
           f"C{row + 1}:{get_column_letter(last_col)}{row + len(keys)}")
    charts.memory_breakdown(ws, row + 1, row + len(keys), 2, FIRST_COL, last_col, 1,
                            f"B{row + len(keys) + 2}", "Memory per rank (stacked ledger lines)")


LARGEST_ON_BINDING = ("=INDEX(rank_breakdown_lines,MATCH(MAX(INDEX(rank_breakdown_gib,0,"
                      "MATCH(TRUE,rank_binding,0))),INDEX(rank_breakdown_gib,0,MATCH(TRUE,"
                      "rank_binding,0)),0))")


def largest_on_binding(src: WorkbookSource) -> str:
    """The label of the binding rank's largest line (what LARGEST_ON_BINDING finds)."""
    plan = src.deployment.plan
    labels = dict(FIXED) | {key: label for key, label, _, _ in _rows(src.engine.name)}
    keys = [key for key in BREAKDOWN if key in labels]
    return labels[max(keys, key=plan.line)]


def _label(ws, row: int, key: str, label: str) -> None:
    ws.cell(row=row, column=1, value=key)
    ws.cell(row=row, column=2, value=label)


def _resolve(formula: str, col: str, at: dict[str, int], last: str) -> str:
    out = re.sub(r"\[(\w+)\]", lambda m: f"{col}{at[m.group(1)]}", formula)
    return re.sub(r"<(\w+)>", lambda m: f"$C${at[m.group(1)]}:${last}${at[m.group(1)]}", out)


def _binding(wb: Workbook, ws, row: int, at: dict[str, int], last: str,
             known: list[dict], dep) -> None:
    """The binding rank: fewest blocks (plain: lowest ceiling), then least left, then first
    (ledger.ranks.build_deployment's min over stages)."""
    def whole(key: str) -> str:
        return f"$C${at[key]}:${last}${at[key]}"

    style.section(ws, row - 1, "the binding rank and the deployment")
    at.update(tie=row, candidate=row + 1, binding=row + 2)
    rows = (("tie", "left, among the fewest", style.BYTES,
             "IF([order]=MIN(<order>),[free_own],9.99E+307)"),
            ("candidate", "fewest, then least left", None,
             "AND([order]=MIN(<order>),[free_own]=MIN(<tie>))"),
            ("binding", "binding rank (its stage)", None,
             "[stage]=INDEX(<stage>,MATCH(TRUE,<candidate>,0))"))
    for key, label, fmt, formula in rows:
        _label(ws, at[key], key, label)
        for i, values in enumerate(known):
            col = get_column_letter(FIRST_COL + i)
            cell = ws.cell(row=at[key], column=FIRST_COL + i,
                           value="=" + _resolve(formula, col, at, last))
            style.as_formula(cell, fmt)
            remember(ws, cell.coordinate, values.get(key))
    define(wb, "rank_binding", SHEET, f"C{at['binding']}:{last}{at['binding']}")
    pick = f"MATCH(TRUE,{whole('candidate')},0)"
    totals_known = {"binding_rank": dep.stages[dep.binding].ranks[0],
                    "deployment_ceiling_requests": dep.plan.memory_ceiling_requests,
                    "total_ceiling_requests": dep.total_ceiling_requests,
                    "deployment_fits": dep.fits,
                    "weights_bytes_all_devices": dep.weights_bytes_all_devices}
    totals = (
        ("binding_rank", "binding rank", style.COUNT,
         f"=INDEX({whole('rank')},{pick})"),
        ("deployment_ceiling_requests", "ceiling per replica", style.REQUESTS,
         f"=INDEX({whole('ceiling')},{pick})"),
        ("total_ceiling_requests", "ceiling, all replicas", style.REQUESTS,
         "=deployment_ceiling_requests*data_parallel_size"),
        ("deployment_fits", "declared load fits on every rank", None,
         f"=AND({whole('fits')})"),
        ("weights_bytes_all_devices", "weights on every GPU", style.BYTES,
         f"=(SUM({whole('weights')})+SUM({whole('weight_metadata')}))*data_parallel_size"),
    )
    for i, (name, label, fmt, formula) in enumerate(totals, start=at['binding'] + 2):
        _label(ws, i, name, label)
        style.as_formula(ws.cell(row=i, column=FIRST_COL, value=formula), fmt)
        remember(ws, f"C{i}", totals_known.get(name))
        define(wb, name, SHEET, f"C{i}")

