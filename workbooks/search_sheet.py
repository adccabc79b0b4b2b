"""`servecap search --xlsx`: the ranked list and the Pareto frontier with its chart on cells."""

from pathlib import Path

from openpyxl import Workbook

from . import charts, page, style
from .export import save_workbook
from .scenario_sheet import RecordedScenario, write_scenario

USD = '"$"#,##0.00'
TOKENS_S = "#,##0.0"
REQ_S = "#,##0.00"
MS = "#,##0.0"
# The columns that print: the deployment's label names its layout; the layout's own columns
# (device, tp, pp, dtypes, batch knobs, replicas) follow, for filtering on screen.
METRICS = (("tokens/s per GPU", "tokens_per_s_per_gpu", TOKENS_S),
           ("tokens/s per user", "tokens_per_s_per_user", TOKENS_S),
           ("goodput [req/s]", "goodput_rps", REQ_S),
           ("SLO attainment", "slo_attainment", "0.0%"),
           ("meets SLOs", "meets_slo", style.BOOL),
           ("SLO capacity [req/s]", "capacity_rps", REQ_S))
TAILS = (("TTFT p50 [ms]", "ttft_ms", "p50"), ("TTFT p99 [ms]", "ttft_ms", "p99"),
         ("TPOT p50 [ms]", "tpot_ms", "p50"), ("TPOT p99 [ms]", "tpot_ms", "p99"))
LAYOUT = (("device", "device"), ("tp", "tensor_parallel_size"),
          ("pp", "pipeline_parallel_size"), ("weight dtype", "weight_dtype"),
          ("kv dtype", "kv_dtype"), ("max_num_seqs", "max_num_seqs"),
          ("max_num_batched_tokens", "max_num_batched_tokens"), ("mode", "mode"),
          ("replicas", "replicas"), ("prefill replicas", "prefill_replicas"),
          ("decode replicas", "decode_replicas"))
COST_COL = 5
PRINTED = 5 + len(METRICS) + len(TAILS)  # rank, deployment, GPUs, the two prices, metrics


def write_search_workbook(report: dict, path: Path, force: bool = False,
                          scenario: RecordedScenario | None = None) -> Path:
    """Search (every simulated candidate, ranked; cost per hour a live formula of GPUs x
    price), Frontier (the non-dominated points and a scatter chart of their cells) and, with
    `scenario`, the Scenario sheet of the search (no Inputs sheet: nothing to tell an edit)."""
    wb = Workbook()
    style.use_default_font(wb)
    _ranked(wb.active, report)
    _frontier(wb.create_sheet("Frontier"), report["frontier"])
    if scenario is not None:
        write_scenario(wb, scenario, {})
    return save_workbook(wb, path, force)


def _ranked(ws, report: dict) -> None:
    ws.title = "Search"
    heads = ["rank", "deployment", "GPUs", "USD per GPU-hour", "USD per hour"] + \
        [h for h, _, _ in METRICS] + [h for h, _, _ in TAILS] + [h for h, _ in LAYOUT]
    style.header(ws, heads)
    formats = [style.COUNT, None, style.COUNT, USD, USD] + [f for _, _, f in METRICS] + \
        [MS] * len(TAILS) + [None] * len(LAYOUT)
    for line, row in enumerate(report["candidates"], start=2):
        values = [line - 1, row["label"], row["num_gpus"],
                  report["prices"][row["device"]]["usd_per_gpu_hour"], f"=C{line}*D{line}",
                  *(row[k] for _, k, _ in METRICS), *(row[k][q] for _, k, q in TAILS),
                  *(row[k] for _, k in LAYOUT)]
        for col, (value, fmt) in enumerate(zip(values, formats, strict=True), start=1):
            cell = ws.cell(row=line, column=col, value=value) if col == COST_COL else \
                style.text(ws, line, col, value)  # a label from input stays text
            style.as_formula(cell, fmt)
    style.fit_columns(ws, minimum=8)
    ws.freeze_panes = "C2"
    page.finish(ws, areas=[page.used_range(ws, max_col=PRINTED)])


def _frontier(ws, front: list[dict]) -> None:
    style.header(ws, ["deployment", "tokens/s per GPU", "tokens/s per user", "USD per hour",
                      "meets SLOs"])
    for line, row in enumerate(front, start=2):
        values = (row["label"], row["tokens_per_s_per_gpu"], row["tokens_per_s_per_user"],
                  row["cost_usd_per_hour"], row["meets_slo"])
        for col, (value, fmt) in enumerate(zip(values, (None, TOKENS_S, TOKENS_S, USD,
                                                        style.BOOL), strict=True), start=1):
            style.as_formula(style.text(ws, line, col, value), fmt)
    style.fit_columns(ws)
    last = max(len(front) + 1, 2)
    block = charts.block_below(ws, last + 3, 1, 110, 26)
    page.break_before(ws, block.first_row - 1)
    chart = charts.xy_lines(ws, [charts.Line(3, 2, 2, last, 1, 0)], charts.Axes(
        "Pareto frontier: throughput per GPU against speed per user", "tokens/s per user",
        "tokens/s per GPU", x_format=charts.COUNT_AXIS), block)
    chart.series[0].tx = None
    chart.legend = None  # one series: the title says what it is
    page.finish(ws)
