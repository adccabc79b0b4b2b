"""`servecap search --xlsx`: the ranked list and the Pareto frontier with its chart on cells."""

from pathlib import Path

from openpyxl import Workbook
from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.utils import get_column_letter

from .export import save_workbook

RANKED = (("deployment", "label"), ("device", "device"), ("tp", "tensor_parallel_size"),
          ("pp", "pipeline_parallel_size"), ("weight dtype", "weight_dtype"),
          ("kv dtype", "kv_dtype"), ("max_num_seqs", "max_num_seqs"),
          ("max_num_batched_tokens", "max_num_batched_tokens"), ("mode", "mode"),
          ("replicas", "replicas"), ("prefill replicas", "prefill_replicas"),
          ("decode replicas", "decode_replicas"), ("GPUs", "num_gpus"))
METRICS = (("tokens/s per GPU", "tokens_per_s_per_gpu"),
           ("tokens/s per user", "tokens_per_s_per_user"), ("goodput req/s", "goodput_rps"),
           ("SLO attainment", "slo_attainment"), ("meets SLOs", "meets_slo"),
           ("SLO capacity req/s", "capacity_rps"))
TAILS = (("TTFT p50 ms", "ttft_ms", "p50"), ("TTFT p99 ms", "ttft_ms", "p99"),
         ("TPOT p50 ms", "tpot_ms", "p50"), ("TPOT p99 ms", "tpot_ms", "p99"))


def write_search_workbook(report: dict, path: Path, force: bool = False) -> Path:
    """Two sheets: Search (every simulated candidate, ranked; cost per hour a live formula of
    GPUs x price) and Frontier (the non-dominated points and a scatter chart of their cells)."""
    wb = Workbook()
    _ranked(wb.active, report)
    _frontier(wb.create_sheet("Frontier"), report["frontier"])
    return save_workbook(wb, path, force)


def _ranked(ws, report: dict) -> None:
    ws.title = "Search"
    heads = [h for h, _ in RANKED] + ["USD per GPU-hour", "USD per hour"] + \
        [h for h, _ in METRICS] + [h for h, _, _ in TAILS]
    ws.append(["rank", *heads])
    gpus = get_column_letter(2 + len(RANKED) - 1)
    price = get_column_letter(2 + len(RANKED))
    for i, row in enumerate(report["candidates"], start=1):
        line = i + 1
        ws.append([i, *(row[k] for _, k in RANKED),
                   report["prices"][row["device"]]["usd_per_gpu_hour"],
                   f"={gpus}{line}*{price}{line}", *(row[k] for _, k in METRICS),
                   *(row[k][q] for _, k, q in TAILS)])
    ws.freeze_panes = "B2"
    ws.column_dimensions["B"].width = 44


def _frontier(ws, front: list[dict]) -> None:
    ws.append(["deployment", "tokens/s per GPU", "tokens/s per user", "USD per hour",
               "meets SLOs"])
    for row in front:
        ws.append([row["label"], row["tokens_per_s_per_gpu"], row["tokens_per_s_per_user"],
                   row["cost_usd_per_hour"], row["meets_slo"]])
    ws.column_dimensions["A"].width = 44
    chart = ScatterChart()
    chart.title = "Pareto frontier"
    chart.style = 13
    chart.x_axis.title = "tokens/s per user"
    chart.y_axis.title = "tokens/s per GPU"
    last = max(len(front) + 1, 2)
    xs = Reference(ws, min_col=3, min_row=2, max_row=last)
    ys = Reference(ws, min_col=2, min_row=2, max_row=last)
    series = Series(ys, xs, title="frontier")
    series.marker.symbol = "circle"
    chart.series.append(series)
    ws.add_chart(chart, "G2")
