"""load --sweep --xlsx: the measured sweep as a workbook, its table and p99-latency chart
drawn by the same code as sweep's capacity workbook (workbooks/record_sheets.py)."""

import os
from pathlib import Path

from .files import announce, publish, temp_beside
from .steady_view import bounds

SHEET = "Load sweep"


def write_sweep_workbook(report: dict, path: Path, force: bool) -> Path:
    from openpyxl import Workbook

    from servecap.workbooks import page, style
    from servecap.workbooks.record_sheets import SWEEP_COLUMNS, sweep_section

    wb = Workbook()
    ws = wb.active
    ws.title = SHEET
    style.section(ws, 1, f"measured SLO capacity of {report['base_url']} ({report['model']})")
    facts = (("workload", report["source"]), ("SLO", report["slo_text"]),
             ("target attainment", report["target_attainment"]),
             ("capacity [req/s]", report["capacity_rps"]),
             ("capacity 95 % interval [req/s]", bounds(report["capacity_rps_ci"],
                                                            sep=" - ")),
             ("limited by", report["capacity_limited_by"]),
             ("requests per step (at most)", report["requests_per_step"]))
    for row, (label, value) in enumerate(facts, start=2):
        ws.cell(row=row, column=1, value=label)
        cell = ws.cell(row=row, column=2, value=value)
        if label == "capacity [req/s]":
            style.as_input(cell, style.RATE)
    slo = report["slo_ms"]
    sweep_section(ws, len(facts) + 3, [_row(p) for p in report["points"]],
                  {"ttft_p99_ms": slo["ttft_ms"], "tpot_p99_ms": slo["tpot_ms"],
                   "e2e_p99_ms": slo["e2e_ms"]})
    for column in "ABCDEFGHIJ":
        ws.column_dimensions[column].width = 16
    ws.column_dimensions["A"].width = 30
    page.finish(ws, areas=[page.used_range(ws, max_col=len(SWEEP_COLUMNS))], title_rows=None)
    with temp_beside(Path(path).resolve()) as (handle, tmp):
        os.close(handle)
        wb.save(tmp)
        publish(tmp, Path(path))
    return announce(Path(path))


def _row(point: dict) -> dict:
    """A probed rate in the sweep table's columns; capacity holds where its run met."""
    return {"rate_per_s": point["rate_per_s"], "achieved_rps": point["achieved_rps"],
            "slo_attainment": point["slo_attainment"], "goodput_rps": point["goodput_rps"],
            "output_tokens_per_s": point["output_tokens_per_s"],
            "ttft_p99_ms": point["ttft_ms"]["p99"], "itl_p99_ms": point["itl_ms"]["p99"],
            "tpot_p99_ms": point["tpot_ms"]["p99"], "e2e_p99_ms": point["e2e_ms"]["p99"],
            "meets_slo": point["verdict"] == "meets"}
