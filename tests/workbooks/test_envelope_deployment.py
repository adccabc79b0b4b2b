"""The Envelope of a tp/pp or engine plan: beside the formula columns (the whole model on one
GPU), the deployment on Ranks planned again by servecap at each row, charted; a row the engine
refuses says why. Read back after a real LibreOffice recalculation."""

import json
from itertools import groupby
from pathlib import Path

import pytest
from conftest import recalc
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.workbooks.envelope import HEADERS

RUNNER = CliRunner()
TP4 = ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4", "--engine", "vllm"]
DEVICES = ["16GiB", "a100-40gb", "h100-80gb", "h200", "b200"]  # 16GiB: 70B at tp 4 does not fit
CONTEXTS = ["4096", "200000", "1024", "32768"]  # out of order: the test sorts by each column
COLUMN = "deployment ceiling, tp 4 x pp 1, vllm [requests] (servecap plan at this point)"


def _run(args: list[str]) -> str:
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def books(soffice_bin, tmp_path_factory) -> dict[str, tuple[Path, Path, dict]]:
    """name: (as written, as LibreOffice recalculated it, plan --json where taken)."""
    folder = tmp_path_factory.mktemp("envelope-deployment")
    written = {name: folder / f"{name}.xlsx" for name in ("tp4", "sweep", "refused", "single")}
    planned = json.loads(_run(["plan", *TP4, "--json", "--xlsx", str(written["tp4"])]))
    _run(["workbook", *TP4[:1], *(a for d in DEVICES for a in ("--device", d)),
          *(a for c in CONTEXTS for a in ("--context", c)), *TP4[3:], "-o",
          str(written["sweep"])])
    _run(["workbook", "gpt-oss-20b", "--device", "h100-80gb", "--device", "t4-16gb",
          "--engine", "vllm", "--context", "4096", "-o", str(written["refused"])])
    _run(["plan", "llama-3.1-8b", "--device", "h100-80gb", "--xlsx", str(written["single"])])
    computed = recalc(soffice_bin, list(written.values()), folder / "recalculated")
    return {name: (path, computed[name], planned if name == "tp4" else {})
            for name, path in written.items()}


def _rows(path: Path) -> list[dict]:
    sheet = load_workbook(path, data_only=True)["Envelope"]
    header = [c.value for c in sheet[1]]
    rows = []
    for values in sheet.iter_rows(min_row=2, values_only=True):
        if values[0] is None:  # the note under the table, a row down
            break
        rows.append(dict(zip(header, values, strict=True)))
    return rows


def test_the_plans_own_point_is_the_ceiling_plan_reports(books) -> None:
    """At the plan's device, context and KV dtype the column is plan --json's ceiling (one
    replica: total_ceiling_requests), and the rank that binds; the whole-model column is 0."""
    _, computed, planned = books["tp4"]
    rows = _rows(computed)
    (own,) = [r for r in rows if r["context [tokens/request]"] == planned["context_tokens"]
              and r["KV dtype"] == planned["dtypes"]["kv_cache"]["dtype"]]
    assert own[COLUMN] == planned["total_ceiling_requests"] > 0
    assert own["binding rank (servecap plan at this point)"] == planned["binding_rank"]
    assert own[HEADERS[-1]] == 0 and own["not planned: why"] is None
    assert all(r[HEADERS[-1]] == 0 and r[COLUMN] > 0 for r in rows)


def test_the_chart_plots_the_deployment_and_the_note_says_which_column_is_which(books) -> None:
    written, computed, _ = books["tp4"]
    sheet = load_workbook(written)["Envelope"]
    assert [c.value for c in sheet[1]][:len(HEADERS)] == HEADERS  # the formula columns kept
    (chart,) = sheet._charts
    title = "".join(run.t for par in chart.title.tx.rich.p for run in par.r or ())
    assert "deployment tp 4 x pp 1, vllm" in title, title
    pivot = [c.value for c in sheet["N"][1:4]]
    assert pivot == ["=I2", "=I3", "=I4"], pivot
    notes = [c.value for c in sheet["A"] if isinstance(c.value, str) and "Columns" in c.value]
    assert len(notes) == 1 and "Columns I-K are servecap's" in notes[0], notes
    assert "$K$" in str(sheet.print_area), sheet.print_area  # the new columns print
    recalculated = load_workbook(computed, data_only=True)["Envelope"]
    assert [c.value for c in recalculated["N"][1:4]] == [r[COLUMN] for r in _rows(computed)[:3]]


def test_the_ceiling_rises_with_the_device_and_falls_with_the_context(books) -> None:
    """Over every KV dtype: at each context, a larger device never holds fewer requests; on
    each device, a longer context never holds more; and the sweep does move it."""
    rows = _rows(books["sweep"][1])
    assert len(rows) == len(DEVICES) * len(CONTEXTS) * 2  # the plan's KV dtype (bf16), fp8

    def runs(key: str, order: str):
        ordered = sorted(rows, key=lambda r: (r["KV dtype"], r[key], r[order]))
        for _, group in groupby(ordered, key=lambda r: (r["KV dtype"], r[key])):
            yield [r[COLUMN] for r in group]

    for ceilings in runs("context [tokens/request]", "device [bytes]"):
        assert ceilings == sorted(ceilings) and len(ceilings) == len(DEVICES), ceilings
    for ceilings in runs("device [bytes]", "context [tokens/request]"):
        assert ceilings == sorted(ceilings, reverse=True), ceilings
    assert min(r[COLUMN] for r in rows) == 0  # 16GiB: the weights alone do not fit
    assert len({r[COLUMN] for r in rows}) > 10


def test_a_row_the_engine_refuses_is_empty_with_its_reason(books) -> None:
    """gpt-oss's MXFP4 checkpoint on a T4 (SM75): vLLM does not run it, so the row has no
    ceiling, a one-line reason and a gap in the chart, not a failed workbook."""
    written, computed, _ = books["refused"]
    rows = _rows(computed)
    ceiling = next(h for h in rows[0] if h.startswith("deployment ceiling"))
    (t4,) = [r for r in rows if "t4-16gb" in r["device"] and r["KV dtype"] == "bf16"]
    (h100,) = [r for r in rows if "h100-80gb" in r["device"] and r["KV dtype"] == "bf16"]
    assert t4[ceiling] is None and t4["binding rank (servecap plan at this point)"] is None
    assert "does not run this mxfp4 checkpoint" in t4["not planned: why"]
    assert "Traceback" not in t4["not planned: why"] and "\n" not in t4["not planned: why"]
    assert h100[ceiling] > 0 and h100["not planned: why"] is None
    sheet = load_workbook(written)["Envelope"]
    pivot_header = [c.value for c in sheet[1]]
    t4_col = next(i for i, v in enumerate(pivot_header, 1) if v and v.startswith("NVIDIA Tesla T4"))
    assert sheet.cell(row=2, column=t4_col).value is None  # a gap, not a 0


def test_a_single_gpu_plain_workbook_has_no_deployment_column(books) -> None:
    sheet = load_workbook(books["single"][0])["Envelope"]
    assert [c.value for c in sheet[1]][:len(HEADERS) + 2] == [*HEADERS, None, "context [tokens]"]
    assert not any("deployment" in str(c.value) for row in sheet.iter_rows() for c in row)
    (chart,) = sheet._charts
    title = "".join(run.t for par in chart.title.tx.rich.p for run in par.r or ())
    assert "one GPU, whole model" in title
