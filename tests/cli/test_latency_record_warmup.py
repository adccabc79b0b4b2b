"""The workbook's Latency record says which warm-up its figures leave out: it read 'none: a
simulation starts from an empty pool' while simulate printed, for the same run, 'measured at
steady state (warm-up 20, drain 21)': the record contradicted the figures beside it."""

import json
from pathlib import Path

import openpyxl

WORKLOAD = Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml"
ARGS = ("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload", WORKLOAD,
        "--context", "8192", "--num-requests", "300")


def _warmup_cell(path: Path) -> str:
    sheet = openpyxl.load_workbook(path)["Latency record"]
    return next(row[2].value for row in sheet.iter_rows() if row[1].value == "warmup")


def test_the_record_names_the_steady_state_window_simulate_measured(run, tmp_path) -> None:
    result = run(*ARGS, "--json")
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["policies"][0]
    assert entry["steady_state"]
    book = tmp_path / "sim.xlsx"
    assert run(*ARGS, "--xlsx", book).exit_code == 0
    cell = _warmup_cell(book)
    assert cell.startswith(f"the first {entry['warmup_requests']} requests excluded (and the "
                           f"last {entry['drain_requests']}, the drain)")
    assert f"window's {entry['measured_requests']} requests" in cell


def test_a_run_without_steady_state_says_every_request_is_measured(run, tmp_path) -> None:
    book = tmp_path / "short.xlsx"
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "100",
                 "--output-len", "10", "--num-requests", "20", "--context", "8192",
                 "--xlsx", book)
    assert result.exit_code == 0, result.output
    assert _warmup_cell(book).startswith("none excluded: no steady state reached")
