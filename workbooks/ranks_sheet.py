"""The Ranks sheet: one column per GPU of a replica, its ledger and engine budget as formulas.

The lines that come from the model's sharding (weights, runtime peak, buffers) are the plan's
per-rank values, styled as inputs; the KV cache, the engine's pool, blocks, concurrency, the
binding rank and the ceiling are formulas over them and the named inputs (ledger.ranks,
ledger.engines). `[key]` in a formula is this rank's cell of that row, `<key>` the whole row.
"""

import re

from openpyxl.utils import get_column_letter
from openpyxl.workbook.workbook import Workbook

from servecap.ledger import dtypes
from servecap.ledger.cache_specs import indexer_bytes_per_token
from servecap.ledger.engines import VLLM, pool_and_headroom
from servecap.ledger.hybrid import HybridLayout, layout
from servecap.ledger.kv import (
    kv_bits_for_layer,
    kv_bits_per_token_layer,
    kv_bytes_per_request,
    kv_heads_per_rank,
)
from servecap.ledger.kv_blocks import V0, kv_cache_groups, uniform_kinds
from servecap.ledger.lora_rules import slots_in_budget
from servecap.ledger.model import ATTENTION_KINDS, CHUNKED, FULL, SLIDING
from servecap.ledger.ranks import StagePlan
from servecap.ledger.state import state_bytes_per_layer
from servecap.ledger.vllm_lines import pool_rules
from servecap.ledger.vllm_versions import TOKENS_FROM_CONCURRENCY

from . import charts, page, style
from .cached import remember
from .formulas import kinds_of
from .geometry import caching_layers, default_shape, full_shape, representative
from .names import define
from .ranks_after import after_known, after_values, plan_after, start_note
from .ranks_formulas import AFTER, FIXED, OPTIONAL, RankModel, rank_rows
from .source import WorkbookSource, cache_bytes_per_request

SHEET = "Ranks"
GROUP_ORDER = (FULL, SLIDING, CHUNKED, "indexer", "state")  # vLLM's cache group kinds
FIRST_COL = 3


def rank_model(src: WorkbookSource) -> RankModel:
    """The formulas' shape: engine, cache kinds, and vLLM's groups for a hybrid."""
    spec, engine = src.spec, src.engine
    kinds = kinds_of(spec)
    vllm = engine.name == VLLM
    rules = {"tokens_from_concurrency": vllm and
             engine.vllm_row.tokens_rule == TOKENS_FROM_CONCURRENCY,
             "concurrency_v0": vllm and engine.kv_formula == V0,
             "lora_outside": vllm and not slots_in_budget(engine.vllm_row)}
    if not vllm or not kinds.hybrid:
        return RankModel(engine.name, kinds, **rules)
    plan = _layout(src, src.deployment.stages[0])
    first = _first_caching(spec)
    return RankModel(engine.name, kinds, plan.kinds, plan.uniform_type,
                     spec.layer_kind(first) == FULL, **rules)


def _first_caching(spec) -> int:
    """The first layer with a KV of its own: its token sizes the page a state must fit
    (ledger.hybrid._block_size, vLLM's model_config.get_head_size())."""
    return next(n for n in range(spec.num_layers)
                if spec.layer_kind(n) in ATTENTION_KINDS and spec.shape_at(n).caches_kv)


def _layout(src: WorkbookSource, item: StagePlan) -> HybridLayout:
    """vLLM's pool layout on this stage's ranks (ledger.hybrid), as the plan built it."""
    serve, shard = item.plan.serve, item.plan.shard
    bits = dtypes.lookup(serve.kv_dtype, "kv_dtype").bits
    rules = pool_rules(src.engine, src.spec, serve)
    return layout(src.spec, bits, shard.layer_ids(src.spec), shard.tensor_parallel_size,
                  serve.context_tokens, rules.window_tokens, serve.block_size_tokens,
                  serve.mamba_cache_mode, rules.checkpoint_alignment, rules.all_chunk_aligned)


def _structure(src: WorkbookSource, item: StagePlan, rank: int,
               model: RankModel) -> dict[str, object]:
    spec, stage, kinds = src.spec, item.stage, model.kinds
    groups = kv_cache_groups(uniform_kinds(spec.attention.layer_kinds, spec.num_layers))
    lines = {line.key: line.num_bytes for line in item.plan.lines}
    out = {"rank": rank, "stage": stage.index, "tp_rank": rank - item.ranks[0],
           "first_layer": stage.layers[0], "last_layer": stage.layers[-1],
           "layers": len(stage.layers),
           "sliding_layers": len(caching_layers(spec, SLIDING, stage.layers))}
    if kinds.hybrid:
        out["full_layers"] = len(caching_layers(spec, FULL, stage.layers))
    if kinds.chunked:
        out["chunked_layers"] = len(caching_layers(spec, CHUNKED, stage.layers))
    if kinds.state:
        out["state_layers"] = len(set(spec.state_layers) & set(stage.layers))
    if model.vllm_hybrid:
        plan = _layout(src, item)
        out.update({f"{kind}_groups": plan.kinds.count(kind)
                    for kind in GROUP_ORDER if kind in plan.kinds})
        out["group_layers"] = plan.group_size
    else:
        vllm = src.engine.name == VLLM
        out.update(full_groups=groups.kinds.count("full") if vllm else 0,
                   sliding_groups=groups.kinds.count(SLIDING) if vllm else 0,
                   group_layers=groups.group_size_on(stage.layers))
    out.update({key: lines.get(key, 0) for key, _ in FIXED
                if key not in OPTIONAL or src.serve.encoder is not None})
    return out | after_values(plan_after(src, item))


def _known(src: WorkbookSource, item: StagePlan, binding: bool, one_stage: bool,
           model: RankModel) -> dict[str, object]:
    """The values the plan already holds for this rank's formula rows (cached beside them);
    a rank's own block count before the binding rank's is known only with one stage."""
    plan, budget, shard = item.plan, item.plan.budget, item.plan.shard
    bits = dtypes.lookup(plan.serve.kv_dtype, "kv_dtype").bits
    out = {"kv_bytes_per_token": plan.kv_bytes_per_token, "kv_cache": plan.line("kv_cache"),
           "kv_bytes_per_request": plan.kv_bytes_per_request, "safety": plan.line("safety"),
           "committed": plan.committed_bytes, "free": plan.free_bytes,
           "ceiling": plan.memory_ceiling_requests, "fits": plan.fits, "binding": binding,
           "kv_pool_spare": plan.line("kv_pool_spare"),
           "fixed": plan.fixed_bytes - plan.line("safety"),
           "kv_heads": 0 if src.spec.attention.kind == "mla"
           else -(-default_shape(src.spec).kv_heads // shard.tensor_parallel_size),
           "kv_bits_layer": _layer_bits(src.spec, bits, shard),
           "kv_request_context": kv_bytes_per_request(src.spec, bits, plan.serve.context_tokens,
                                                      plan.serve.block_size_tokens, shard,
                                                      plan.window_in_flight_tokens)}
    out.update(_cache_known(src, plan, bits))
    if budget is None:
        return out | {"order": plan.memory_ceiling_requests, "free_own": plan.free_bytes}
    world = shard.tensor_parallel_size * (1 if one_stage else 2)
    pool, headroom, _, _ = pool_and_headroom(src.engine, plan.device_bytes, plan.lines, world)
    out.update(kv_pool_bytes=budget.kv_pool_bytes, num_gpu_blocks=budget.num_gpu_blocks,
               kv_cache_tokens=budget.kv_cache_tokens, block_bytes=budget.block_bytes,
               max_concurrency=float(budget.max_concurrency), num_groups=budget.num_groups,
               blocks_per_request=budget.blocks_per_request, pool=pool, headroom=headroom)
    if model.vllm_hybrid:
        out.update(_page_known(src, item))
    out.update(after_known(item, plan_after(src, item), one_stage))
    if one_stage:
        out.update(own_blocks=budget.num_gpu_blocks, order=budget.num_gpu_blocks,
                   free_own=plan.free_bytes)
    return out


def _layer_bits(spec, bits: int, shard) -> int:
    """The plain cells' layer (geometry.representative): one token's bits on this rank."""
    layer = representative(spec, False)
    return kv_bits_for_layer(spec, layer, bits, shard) if layer is not None else \
        kv_bits_per_token_layer(spec, bits, shard)


def _cache_known(src: WorkbookSource, plan, bits: int) -> dict[str, object]:
    """The full layers' shape, the indexer K and the fixed states on this rank."""
    spec, shard = src.spec, plan.shard
    full = representative(spec, True)
    shape = full_shape(spec)
    out = {"indexer_bytes_per_token": plan.indexer_bytes_per_token,
           "indexer_cache": plan.line("indexer_cache"),
           "state_bytes_per_request": plan.state_bytes_per_request,
           "state_cache": plan.line("state_cache"),
           "cache_bytes_per_request": cache_bytes_per_request(plan),
           "full_kv_heads": -(-shape.kv_heads // shard.tensor_parallel_size) if shape
           else kv_heads_per_rank(spec, shard.tensor_parallel_size, FULL),
           "kv_bits_full_layer": kv_bits_for_layer(spec, full, bits, shard)
           if full is not None else None}
    if spec.state is not None:
        out["state_layer_bytes"] = state_bytes_per_layer(spec.state, shard.tensor_parallel_size)
    return out


def _page_known(src: WorkbookSource, item: StagePlan) -> dict[str, object]:
    """The page arithmetic's steps as ledger.hybrid.layout took them on this rank."""
    spec, plan = src.spec, _layout(src, item)
    bits = dtypes.lookup(item.plan.serve.kv_dtype, "kv_dtype").bits
    page = plan.page_bytes
    token = {kind: kv_bits_for_layer(spec, n, bits, item.plan.shard) // 8
             for n in reversed(range(spec.num_layers))
             if (kind := spec.layer_kind(n)) in ATTENTION_KINDS and spec.shape_at(n).caches_kv}
    if spec.attention.indexer_head_dim:
        token["indexer"] = indexer_bytes_per_token(spec.attention.indexer_head_dim)
    first = _first_caching(spec)
    out = {"attention_block_size": plan.block_size_tokens, "page_bytes": page,
           "one_token_bytes": kv_bits_for_layer(spec, first, bits, item.plan.shard) // 8}
    out.update({f"{kind}_block_size": page // per for kind, per in token.items()})
    return out


def _ties(known: list[dict]) -> None:
    """The binding helper rows, where every rank's order and own free bytes are known."""
    if any("order" not in k or "free_own" not in k for k in known):
        return
    least = min(k["order"] for k in known)
    for k in known:
        k["tie"] = k["free_own"] if k["order"] == least else 9.99e307
    fewest = min(k["tie"] for k in known)
    for k in known:
        k["candidate"] = k["order"] == least and k["free_own"] == fewest


def write_ranks(wb: Workbook, src: WorkbookSource) -> None:
    dep = src.deployment
    ws = wb.create_sheet(SHEET)
    columns = [(item, rank) for item in dep.stages for rank in item.ranks]
    last = get_column_letter(FIRST_COL + len(columns) - 1)
    style.header(ws, ["key", "line"] + [f"rank {rank}" for _, rank in columns])
    at: dict[str, int] = {}
    model = rank_model(src)
    values = [_structure(src, item, rank, model) for item, rank in columns]
    binding = dep.stages[dep.binding]
    known = [_known(src, item, item is binding, len(dep.stages) == 1, model)
             for item, _ in columns]
    _ties(known)
    row = 2
    for key in values[0]:
        at[key] = row
        _label(ws, row, key, VALUE_LABELS.get(key, key.replace("_", " ")))
        for i, data in enumerate(values):
            style.as_input(ws.cell(row=row, column=FIRST_COL + i, value=data[key]),
                           style.BYTES if key in VALUE_LABELS else style.COUNT)
        row += 1
    at["fixed"] = row
    rows = [("fixed", "fixed lines", style.BYTES, "+".join(f"[{k}]" for k, _ in FIXED
                                                           if k in at))]
    rows += rank_rows(model)
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
    style.fit_columns(ws)
    if "starts" in at:
        _note(ws, ws.max_row + 2, start_note(src), FIRST_COL + len(columns) - 1)
    _breakdown(ws, ws.max_row + 2, at, values, known)
    # from B (the key column is for scripts); past RANKS_PER_PAGE ranks, more pages wide,
    # each with the line names
    wide = -(-len(columns) // RANKS_PER_PAGE)
    if wide > 1:
        ws.print_title_cols = "B:B"
    page.finish(ws, areas=[page.used_range(ws, first_col=2)], pages_wide=wide)


VALUE_LABELS = dict(FIXED + AFTER)  # value rows in bytes, by their labels
RANKS_PER_PAGE = 8  # one page wide at about 75 %; more ranks print pages wide at 75 %
CHART_RANK_COLUMNS = 4  # of the rank columns a 75 % page holds, the ones the chart may cover


BREAKDOWN = tuple(key for key, _ in FIXED) + ("kv_cache", "indexer_cache", "state_cache",
                                              "kv_pool_spare", "safety")
# lines only some plans hold (quantization metadata, vLLM's weight layout, LoRA slots, EPLB,
# a multimodal model's encoder): in the breakdown and its chart's legend only where a rank
# holds them, so the breakdown and its chart keep to one page (every line stays above)
ONLY_WHEN_HELD = frozenset({"weight_metadata", "weights_resident", "lora_adapters", "eplb",
                            "encoder_cache", "encoder_profile", "encoder_weights"})


def _breakdown(ws, row: int, at: dict[str, int], values: list[dict], known: list[dict]) -> None:
    """Every line of each rank in GiB, and the stacked column chart over them."""
    page.break_before(ws, row)  # the breakdown and its chart on a page of their own
    _section(ws, row, "memory breakdown per rank [GiB], charted below")
    keys = [key for key in BREAKDOWN if key in at and (key not in ONLY_WHEN_HELD or any(
        data.get(key, cached.get(key)) for data, cached in zip(values, known, strict=True)))]
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
    # a column per rank, each legible; on a sheet more than a page wide, within the rank
    # columns the first page surely holds (the line names in B repeat on every page: a chart
    # reaching into B, or past the first page, would be drawn again, cut, on the next)
    width = max(CHART_WIDTH, 24 + 10 * len(values))
    if len(values) > RANKS_PER_PAGE:
        width = sum(ws.column_dimensions[get_column_letter(FIRST_COL + i)].width or 10
                    for i in range(CHART_RANK_COLUMNS))
    block = charts.block_below(ws, row + len(keys) + 2, FIRST_COL, width, CHART_ROWS)
    charts.memory_breakdown(ws, row + 1, row + len(keys), 2, FIRST_COL, last_col, 1, block,
                            "Memory per rank (stacked ledger lines)", keys=keys)


CHART_WIDTH, CHART_ROWS = 90, 20


LARGEST_ON_BINDING = ("=INDEX(rank_breakdown_lines,MATCH(MAX(INDEX(rank_breakdown_gib,0,"
                      "MATCH(TRUE,rank_binding,0))),INDEX(rank_breakdown_gib,0,MATCH(TRUE,"
                      "rank_binding,0)),0))")


def largest_on_binding(src: WorkbookSource) -> str:
    """The label of the binding rank's largest line (what LARGEST_ON_BINDING finds)."""
    plan = src.deployment.plan
    labels = dict(FIXED) | {key: label for key, label, _, _ in rank_rows(rank_model(src))}
    keys = [key for key in BREAKDOWN if key in labels]
    return labels[max(keys, key=plan.line)]


def _note(ws, row: int, text: str, last_col: int) -> None:
    """A sentence wrapped across the line-name and rank columns, its row tall enough for it
    (a spreadsheet does not grow a merged cell's row)."""
    style.note(ws, row, text, last_col=last_col, column=2)
    width = sum(ws.column_dimensions[get_column_letter(c)].width or 10
                for c in range(2, last_col + 1))
    ws.row_dimensions[row].height = 13 * (-(-len(text) * 11 // (10 * int(width))) + 1)


def _section(ws, row: int, title: str) -> None:
    """A section title in the line-name column, wrapped there: that column repeats on every
    page of a wide sheet, where text running on into the next column would be cut."""
    style.section(ws, row, title, column=2)
    ws.cell(row=row, column=2).alignment = style.WRAP


def _label(ws, row: int, key: str, label: str) -> None:
    ws.cell(row=row, column=1, value=key)
    ws.cell(row=row, column=2, value=label)


def _absent(key: str) -> str:
    if key not in OPTIONAL:
        raise KeyError(key)
    return "0"


def _resolve(formula: str, col: str, at: dict[str, int], last: str) -> str:
    out = re.sub(r"\[(\w+)\]", lambda m: f"{col}{at[m.group(1)]}" if m.group(1) in at
                 else _absent(m.group(1)), formula)
    return re.sub(r"<(\w+)>", lambda m: f"$C${at[m.group(1)]}:${last}${at[m.group(1)]}", out)


def _binding(wb: Workbook, ws, row: int, at: dict[str, int], last: str,
             known: list[dict], dep) -> None:
    """The binding rank: fewest blocks (plain: lowest ceiling), then least left, then first
    (ledger.ranks.build_deployment's min over stages)."""
    def whole(key: str) -> str:
        return f"$C${at[key]}:${last}${at[key]}"

    _section(ws, row - 1, "the binding rank and the deployment")
    at.update(tie=row, candidate=row + 1, binding=row + 2)
    rows = (("tie", "left, among the fewest", style.BYTES,
             "IF([order]=MIN(<order>),[free_own],9.99E+307)"),
            ("candidate", "fewest, then least left", style.BOOL,
             "AND([order]=MIN(<order>),[free_own]=MIN(<tie>))"),
            ("binding", "binding rank (its stage)", style.BOOL,
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
                    "deployment_starts": all(item.plan.starts for item in dep.stages),
                    "weights_bytes_all_devices": dep.weights_bytes_all_devices}
    totals = (
        ("binding_rank", "binding rank", style.COUNT,
         f"=INDEX({whole('rank')},{pick})"),
        ("deployment_ceiling_requests", "ceiling per replica", style.REQUESTS,
         f"=INDEX({whole('ceiling')},{pick})"),
        ("total_ceiling_requests", "ceiling, all replicas", style.REQUESTS,
         "=deployment_ceiling_requests*data_parallel_size"),
        ("deployment_fits", "declared load fits on every rank", style.BOOL,
         f"=AND({whole('fits')})"),
        ("weights_bytes_all_devices", "weights on every GPU", style.BYTES,
         f"=(SUM({whole('weights')})+SUM({whole('weight_metadata')}))*data_parallel_size"),
    ) + ((("deployment_starts", "vLLM starts on every rank", style.BOOL,
           f"=AND({whole('starts')})"),) if "starts" in at else ())
    for i, (name, label, fmt, formula) in enumerate(totals, start=at['binding'] + 2):
        _label(ws, i, name, label)
        style.as_formula(ws.cell(row=i, column=FIRST_COL, value=formula), fmt)
        remember(ws, f"C{i}", totals_known.get(name))
        define(wb, name, SHEET, f"C{i}")

