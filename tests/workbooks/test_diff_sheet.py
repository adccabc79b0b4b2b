"""`servecap diff --xlsx`: the Diff sheet recalculated by a real LibreOffice: every difference,
change in GiB and committed sum its formulas compute equals the comparison's figures, and the
workbook plans again as a scenario file (side A's scenario, recorded)."""

import json

import pytest
from conftest import recalc
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.workbooks.names import cell_of

ARGS = ["llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm==0.21", "--against",
        "vllm==0.23"]


def test_the_diff_sheet_recalculates_to_the_comparison(soffice_bin, tmp_path) -> None:
    path = tmp_path / "diff.xlsx"
    result = CliRunner().invoke(app, ["diff", *ARGS, "--xlsx", str(path)])
    assert result.exit_code == 0, result.output
    out = json.loads(CliRunner().invoke(app, ["diff", *ARGS, "--json"]).stdout)
    computed = recalc(soffice_bin, [path], tmp_path / "recalculated", workers=1)["diff"]
    ws = load_workbook(computed, data_only=True)["Diff"]
    rows = {ws.cell(row=r, column=1).value: r for r in range(1, ws.max_row + 1)}
    for figure in out["lines"] + out["pool"]:
        row = rows[figure["key"]]
        assert ws.cell(row=row, column=3).value == figure["a"], figure["key"]
        assert ws.cell(row=row, column=5).value == pytest.approx(figure["b"] - figure["a"],
                                                                abs=1e-9), figure["key"]
        if figure["unit"] == "bytes":
            assert abs(ws.cell(row=row, column=6).value - figure["delta"] / 2**30) < 1e-9
    for figure in out["outcome"]:  # yes/no: 'changed' or blank, never TRUE/FALSE as B - A
        if figure["unit"] == "bool":
            shown = ws.cell(row=rows[figure["key"]], column=5).value
            assert shown in (("changed",) if figure["a"] != figure["b"] else (None, "")), shown
    wb = load_workbook(computed, data_only=True)
    committed = {side: sum(f[side] for f in out["lines"]) for side in ("a", "b")}
    assert cell_of(wb, "diff_a_committed_bytes").value == committed["a"]
    assert cell_of(wb, "diff_b_committed_bytes").value == committed["b"]
    assert cell_of(wb, "diff_b_engine").value.startswith("vllm==0.23 (v0.23.0 rules, V2")
    assert cell_of(wb, "diff_b_pool_bytes").value - cell_of(wb, "diff_a_pool_bytes").value \
        == figure_of(out, "kv_pool_bytes")["delta"]
    assert "v0.23.0: the model moves to Model Runner V2" in \
        ws.cell(row=rows["cuda_graphs"], column=8).value
    again = CliRunner().invoke(app, ["plan", "--scenario", str(computed), "--json"])
    plan = json.loads(again.stdout)
    assert plan["kv_pool_bytes"] == figure_of(out, "kv_pool_bytes")["a"]


def figure_of(out: dict, key: str) -> dict:
    return next(f for s in ("lines", "pool", "outcome") for f in out[s] if f["key"] == key)
