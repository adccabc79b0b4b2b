"""Each chart exists where a reviewer looks for it, with every series bound to cells of the
workbook that hold numbers once LibreOffice has recalculated them."""

import re

import pytest
from conftest import recalc
from openpyxl import load_workbook
from openpyxl.chart import BarChart, ScatterChart
from openpyxl.utils import range_boundaries

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags
from servecap.cli.workbook_cmd import workbook_source
from servecap.workbooks.export import DEFAULT_CONTEXTS_TOKENS, build_workbook, save_workbook

POINTS = [{"rate_per_s": rate, "achieved_rps": rate * 0.98, "slo_attainment": 1.0 - rate / 40,
           "goodput_rps": rate * 0.9, "output_tokens_per_s": rate * 200.0,
           "ttft_p99_ms": 50.0 * rate, "itl_p99_ms": 10.0 + rate, "tpot_p99_ms": 8.0 + rate,
           "e2e_p99_ms": 900.0 * rate, "meets_slo": rate <= 4}
          for rate in (1.0, 2.0, 4.0, 8.0, 16.0)]
SLO = {"ttft_p99_ms": 500.0, "tpot_p99_ms": 30.0, "e2e_p99_ms": 5000.0}


@pytest.fixture(scope="module")
def books(soffice_bin, tmp_path_factory):
    folder = tmp_path_factory.mktemp("charts")
    single = workbook_source("llama-3.1-8b", PlanFlags(device="40GiB"))
    tp = workbook_source("llama-3.1-70b-instruct", PlanFlags(device="h100-80gb"),
                         DeployFlags(tensor_parallel_size=4, pipeline_parallel_size=2,
                                     engine="vllm"))
    hybrid = workbook_source("qwen3.6-35b-a3b", PlanFlags(device="h100-80gb", context=8192))
    hybrid_tp = workbook_source("nemotron-3-nano-30b-a3b", PlanFlags(device="h100-80gb"),
                                DeployFlags(tensor_parallel_size=2, engine="vllm"))
    paths = {
        "single": save_workbook(build_workbook(single), folder / "single.xlsx"),
        "hybrid": save_workbook(build_workbook(hybrid), folder / "hybrid.xlsx"),
        "hybrid-ranks": save_workbook(build_workbook(hybrid_tp), folder / "hybrid-ranks.xlsx"),
        "ranks": save_workbook(build_workbook(tp), folder / "ranks.xlsx"),
        "sweep": save_workbook(build_workbook(single, results={"sweep": POINTS,
                                                               "slo_ms": SLO}),
                               folder / "sweep.xlsx"),
    }
    computed = recalc(soffice_bin, list(paths.values()), folder / "recalculated", workers=1)
    return {name: (load_workbook(path), load_workbook(computed[name], data_only=True))
            for name, path in paths.items()}


def _cells(wb, ref: str) -> list:
    """The values a chart reference ('Sheet'!$A$1:$B$2) points at."""
    sheet, area = re.fullmatch(r"'?(.+?)'?!(.+)", ref).groups()
    assert sheet in wb.sheetnames, ref
    min_col, min_row, max_col, max_row = range_boundaries(area.replace("$", ""))
    return [cell.value for row in wb[sheet].iter_rows(min_row=min_row, max_row=max_row,
                                                       min_col=min_col, max_col=max_col)
            for cell in row]


def _bound(chart, computed) -> list[list]:
    """Every series: its values are numbers of the workbook, its title a cell with text."""
    out = []
    for series in chart.series:
        ref = series.val if series.val is not None else series.yVal
        values = _cells(computed, ref.numRef.f)
        assert any(isinstance(v, int | float) for v in values), series.val.numRef.f
        title = series.tx.strRef.f
        assert all(isinstance(v, str) and v for v in _cells(computed, title)), title
        out.append(values)
    assert chart.legend is not None and chart.legend.position == "b"
    return out


def _chart(wb, sheet: str, kind):
    charts = [c for c in wb[sheet]._charts if isinstance(c, kind)]
    assert len(charts) == 1, (sheet, wb[sheet]._charts)
    return charts[0]


@pytest.mark.parametrize("name, lines", [("single", 5), ("hybrid", 6)])
def test_memory_breakdown_of_the_device_stacks_the_ledger_lines(books, name, lines) -> None:
    """A series per ledger line, the fixed state of a hybrid included, then what is left: the
    column stacks to the whole device (79.19 GiB usable on an H100 80GB, not the 24 GiB
    committed on an axis that ended at 30)."""
    written, computed = books[name]
    chart = _chart(written, "Ledger", BarChart)
    assert chart.grouping == "stacked" and len(chart.series) == lines + 1
    values = _bound(chart, computed)
    ledger = computed["Ledger"]
    assert [ledger[f"A{2 + lines + i}"].value for i in range(3)] == [
        "committed_bytes", "device_line_bytes", "free_bytes"]
    committed, device, left = (ledger[f"D{2 + lines + i}"].value for i in range(3))
    assert sum(v[0] for v in values[:-1]) == pytest.approx(committed, rel=1e-12)
    assert values[-1][0] == pytest.approx(left, rel=1e-12) and left > 0
    assert sum(v[0] for v in values) == pytest.approx(device, rel=1e-12)
    titles = [_cells(computed, series.tx.strRef.f)[0] for series in chart.series]
    assert titles[-1] == "left"
    assert ("fixed state in use" in titles) is (name == "hybrid")


def test_memory_breakdown_per_rank_stacks_the_fixed_state_of_a_hybrid(books) -> None:
    written, computed = books["hybrid-ranks"]
    chart = _chart(written, "Ranks", BarChart)
    titles = [_cells(computed, series.tx.strRef.f)[0] for series in chart.series]
    assert "fixed state in use" in titles and "KV cache in use" in titles
    state = _bound(chart, computed)[titles.index("fixed state in use")]
    assert len(state) == 2 and all(v > 0 for v in state)


def test_memory_breakdown_has_a_stacked_column_per_rank(books) -> None:
    written, computed = books["ranks"]
    chart = _chart(written, "Ranks", BarChart)
    assert chart.grouping == "stacked" and len(chart.series) >= 8
    values = _bound(chart, computed)
    assert all(len(v) == 8 for v in values)  # tp 4 x pp 2 ranks
    categories = _cells(computed, chart.series[0].cat.strRef.f
                        if chart.series[0].cat.strRef else chart.series[0].cat.numRef.f)
    assert categories == [f"rank {r}" for r in range(8)]


def test_envelope_has_a_line_per_device_and_kv_dtype_over_enough_contexts(books) -> None:
    written, computed = books["single"]
    chart = _chart(written, "Envelope", ScatterChart)
    values = _bound(chart, computed)
    assert len(values) == 2  # one device: bf16 (the plan's) and fp8
    assert all(len(v) >= len(DEFAULT_CONTEXTS_TOKENS) >= 15 for v in values)
    assert values[0] == sorted(values[0], reverse=True)  # the ceiling falls with context
    contexts = _cells(computed, chart.series[0].xVal.numRef.f)
    assert contexts == sorted(contexts) and contexts[0] == 1024  # x: the contexts themselves
    # 1K to 128K tokens span two decades: a logarithmic context axis, as is the ceiling's
    assert chart.x_axis.scaling.logBase == 10 and chart.y_axis.scaling.logBase == 10
    assert chart.x_axis.scaling.min <= contexts[0] and chart.x_axis.scaling.max >= contexts[-1]


def test_latency_chart_has_percentiles_slo_lines_and_the_capacity(books) -> None:
    written, computed = books["sweep"]
    chart = _chart(written, "Latency record", ScatterChart)
    values = _bound(chart, computed)
    titles = [_cells(computed, s.tx.strRef.f)[0] for s in chart.series]
    assert titles[:4] == ["TTFT p99", "ITL p99", "TPOT p99", "e2e p99"]
    assert titles[4:6] == ["SLO TTFT p99 [ms]", "SLO TPOT p99 [ms]"]  # the TPOT target on TPOT
    assert titles[6:] == ["SLO e2e p99 [ms]", "capacity"]
    tpot = chart.series[titles.index("TPOT p99")]
    slo = chart.series[titles.index("SLO TPOT p99 [ms]")]
    assert tpot.graphicalProperties.line.solidFill.srgbClr == \
        slo.graphicalProperties.line.solidFill.srgbClr  # drawn in the colour of its metric
    assert values[titles.index("SLO TPOT p99 [ms]")] == [30.0, 30.0]
    rates = _cells(computed, chart.series[-1].xVal.numRef.f)
    assert rates == [4.0] and values[-1] == [900.0 * 4]  # the highest rate holding the SLO


def test_charts_are_not_on_blank_templates(books) -> None:
    written, _ = books["single"]
    assert written["Latency record"].sheet_state == "hidden"
    assert not written["Latency record"]._charts


def test_a_count_axis_over_a_few_units_steps_by_whole_requests(tmp_path) -> None:
    """A 70B on one H100 has no room for a request at any context: the Envelope's chart is
    flat at 0, and its axis, stepping by 0.5 printed whole, read '0, 1, 1'."""
    from openpyxl import load_workbook
    from typer.testing import CliRunner

    from servecap.cli.app import app

    book = tmp_path / "70b.xlsx"
    result = CliRunner().invoke(app, ["workbook", "llama-3.1-70b-instruct", "--device",
                                      "h100-80gb", "-o", str(book)])
    assert result.exit_code == 0, result.output
    (chart,) = load_workbook(book)["Envelope"]._charts
    axis = chart.y_axis
    assert (axis.majorUnit, axis.scaling.min, axis.scaling.max) == (1, 0, 1)
