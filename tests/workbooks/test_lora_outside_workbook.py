"""Where vLLM's profile misses the LoRA slots (V0's memory_profiling rows, vllm issue 14450),
the Ranks sheet's pool and headroom formulas recalculate in LibreOffice to plan --json: the
pool without the slots, the headroom less them; and where the profile holds them, as before."""

import json

import pytest
from conftest import recalc
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app

KEYS = {"kv_pool_bytes": "kv_pool_bytes", "num_gpu_blocks": "num_gpu_blocks",
        "safety_bytes": "safety", "free_bytes": "free", "committed_bytes": "committed",
        "max_concurrency": "max_concurrency"}


@pytest.mark.parametrize("version", ["0.7.1", "0.8.0"])
def test_the_ranks_sheet_recalculates_to_plan_json(soffice_bin, tmp_path, version) -> None:
    path = tmp_path / f"lora-{version}.xlsx"
    result = CliRunner().invoke(app, [
        "plan", "llama-3.1-8b", "--device", "h100-80gb", "--engine", f"vllm=={version}",
        "--context", "8192", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64",
        "--xlsx", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rank = json.loads(result.stdout)["ranks"][0]
    computed = recalc(soffice_bin, [path], tmp_path / "out")[path.stem]
    ws = load_workbook(computed, data_only=True)["Ranks"]
    rows = {ws.cell(row=r, column=1).value: r for r in range(1, ws.max_row + 1)}
    for key, row in KEYS.items():
        got = ws.cell(row=rows[row], column=3).value
        assert got == pytest.approx(rank[key], rel=1e-14), (version, key, got, rank[key])
    formula = load_workbook(path)["Ranks"].cell(row=rows["pool"], column=3).value
    lora_cell = f"C{rows['lora_adapters']}"
    assert (lora_cell in formula) is (version != "0.7.1"), formula
