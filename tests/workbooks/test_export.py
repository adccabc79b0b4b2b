"""Workbook structure: sheets, defined names, formatting, review sheets and atomic saves."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openpyxl import Workbook, load_workbook

from servecap.cli.inputs import PlanFlags, plan_scenario
from servecap.cli.workbook_cmd import workbook_source
from servecap.cli.workbook_scenario import record
from servecap.ledger.errors import SpecError
from servecap.workbooks import style
from servecap.workbooks.export import SHEETS, build_workbook, save_workbook
from servecap.workbooks.inputs_sheet import model_rows
from servecap.workbooks.names import INPUT_NAMES, OUTPUT_NAMES, cell_of
from servecap.workbooks.readback import MODEL_NAMES, read_plan_inputs
from servecap.workbooks.record_sheets import (
    PERCENTILE_METRICS,
    RECORD_FIELDS,
    VERIFY_HEADERS,
    fill_verification,
)

CHART_NS = "http://schemas.openxmlformats.org/drawingml/2006/chart"


@pytest.fixture(scope="module")
def src():
    return workbook_source("llama-3.1-8b", PlanFlags(device="40GiB", context=4096,
                                                      concurrency=16))


@pytest.fixture(scope="module")
def book(src, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("export") / "capacity.xlsx"
    return save_workbook(build_workbook(src, scenario=_record(src, path)), path)


def _record(src, path: Path):
    """The Scenario sheet a command writes for these flags."""
    scenario = plan_scenario("llama-3.1-8b", PlanFlags(device="40GiB", context=4096,
                                                       concurrency=16))
    return record(scenario, src.plan(), None, path)


def test_sheets_in_review_order(book, src) -> None:
    assert load_workbook(book).sheetnames == list(SHEETS)
    unrecorded = [name for name in SHEETS if name != "Scenario"]  # from Python, none given
    assert build_workbook(src).sheetnames == unrecorded


def test_the_defined_name_contract_points_at_single_cells(book) -> None:
    wb = load_workbook(book)
    for name in INPUT_NAMES + OUTPUT_NAMES:
        assert cell_of(wb, name) is not None, name
    assert cell_of(wb, "context_tokens").value == 4096
    assert cell_of(wb, "requests").value == 16
    assert cell_of(wb, "device_bytes").value == 40 * 2**30


def test_inputs_look_different_from_formulas(book) -> None:
    wb = load_workbook(book)
    inp, out = cell_of(wb, "context_tokens"), cell_of(wb, "committed_bytes")
    assert inp.fill.fgColor.rgb != out.fill.fgColor.rgb
    assert inp.font.color.rgb != out.font.color.rgb
    assert "tokens" in inp.number_format and '" B"' in out.number_format


def test_frozen_headers_and_fitted_columns(book) -> None:
    wb = load_workbook(book)
    for ws in wb.worksheets:
        assert ws.freeze_panes == "A2", ws.title
        assert ws.column_dimensions["A"].width >= 10, ws.title
    assert wb["Inputs"].column_dimensions["A"].width >= len("quantized_bits_per_parameter")
    assert any(c.number_format.endswith('" GiB"') for c in wb["Ledger"]["D"][1:6])


def test_model_cells_read_back_are_the_ones_written(src) -> None:
    """The model's cells, then the one the engine's release sets for every model (read back
    where a workbook names it: RELEASE_NAMES)."""
    assert [row.name for row in model_rows(src)] == [*MODEL_NAMES, "window_in_flight_tokens"]


def test_latency_record_is_blank_field_names_without_results(book) -> None:
    ws = load_workbook(book)["Latency record"]
    keys = [row[1] for row in ws.iter_rows(min_row=2, values_only=True) if row[1]]
    assert [k for k, _, _ in PERCENTILE_METRICS] == keys[:4]
    assert {"input_tokens_per_s", "output_tokens_per_s"} <= set(keys)
    assert {k for k, _ in RECORD_FIELDS} <= set(keys)
    values = [v for row in ws.iter_rows(min_row=2, min_col=3, values_only=True) for v in row]
    assert all(v is None for v in values), "no invented latency values"


def test_latency_record_filled_from_results(src) -> None:
    results = {"ttft_ms": {"p50": 120.0, "p95": 300.5, "p99": 410.0},
               "output_tokens_per_s": 950.0, "record": {"source": "servecap simulate"}}
    ws = build_workbook(src, results=results)["Latency record"]
    rows = {row[1]: row for row in ws.iter_rows(min_row=2, values_only=True) if row[1]}
    assert rows["ttft_ms"][2:5] == (120.0, 300.5, 410.0)
    assert rows["queue_delay_ms"][2:5] == (None, None, None)
    assert rows["output_tokens_per_s"][2] == 950.0 and rows["input_tokens_per_s"][2] is None
    assert rows["source"][2] == "servecap simulate"


def test_unknown_result_keys_are_refused(src) -> None:
    with pytest.raises(SpecError, match="ttft_p50"):
        build_workbook(src, results={"ttft_p50": 1.0})


def test_verification_is_headers_only_until_filled(src) -> None:
    wb = build_workbook(src)
    ws = wb["Verification"]
    assert [c.value for c in ws[1]] == list(VERIFY_HEADERS)
    assert all(v is None for row in ws.iter_rows(min_row=2, values_only=True) for v in row)
    fill_verification(wb, [{"line": "weights", "predicted_bytes": 16060522496,
                             "measured_bytes": 16060522496, "residual_bytes": 0,
                             "verdict": "ok"},
                            {"line": "kv_cache", "predicted_bytes": 8589934592,
                             "measured_bytes": None, "residual_bytes": None,
                             "verdict": "not measured"}])
    rows = list(ws.iter_rows(min_row=2, values_only=True))
    assert rows == [("weights", 16060522496, 16060522496, 0, "ok"),
                    ("kv_cache", 8589934592, None, None, "not measured")]


def test_existing_file_needs_force(src, tmp_path) -> None:
    path = tmp_path / "cap.xlsx"
    path.write_bytes(b"a reviewer's file")
    with pytest.raises(SpecError, match="--force"):
        save_workbook(build_workbook(src), path)
    assert path.read_bytes() == b"a reviewer's file"
    save_workbook(build_workbook(src, scenario=_record(src, path)), path, force=True)
    assert load_workbook(path).sheetnames == list(SHEETS)


class _InterruptedWorkbook(Workbook):
    """A save that dies half-way, as a Ctrl-C or a full disk would."""

    def save(self, filename):
        Path(filename).write_bytes(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt


def test_an_interrupted_save_leaves_the_old_file_and_no_debris(tmp_path) -> None:
    path = tmp_path / "cap.xlsx"
    path.write_bytes(b"previous workbook")
    with pytest.raises(KeyboardInterrupt):
        save_workbook(_InterruptedWorkbook(), path, force=True)
    assert path.read_bytes() == b"previous workbook"
    assert [p.name for p in tmp_path.iterdir()] == ["cap.xlsx"]


def test_missing_folder_is_a_clear_error(src, tmp_path) -> None:
    with pytest.raises(SpecError, match="existing folder"):
        save_workbook(build_workbook(src), tmp_path / "nope" / "cap.xlsx")
    with pytest.raises(SpecError, match="existing folder"):
        save_workbook(build_workbook(src), tmp_path, force=True)


@settings(max_examples=12, deadline=None)
@given(lengths=st.lists(st.integers(min_value=1, max_value=70_000), min_size=1, max_size=12),
       prefix=st.integers(min_value=0, max_value=5000))
def test_live_lengths_survive_the_round_trip_in_order(lengths, prefix, tmp_path_factory):
    prefix = min(prefix, min(lengths))  # every sequence holds the whole prefix
    src = workbook_source("qwen2.5-7b", PlanFlags(device="80GiB", lengths=",".join(
        map(str, lengths)), shared_prefix=prefix))
    path = save_workbook(build_workbook(src), tmp_path_factory.mktemp("runs") / "c.xlsx")
    flags = read_plan_inputs(path).flags
    assert flags["lengths"] == ",".join(map(str, lengths))
    assert flags["shared_prefix"] == prefix and flags["context"] is None


def test_verification_reads_as_a_report_with_tolerance_ceiling_and_run_record(src) -> None:
    wb = build_workbook(src)
    record = {"date": "2026-12-01T04:00:00Z", "machine": "gpu-box-1", "device": "NVIDIA H100",
              "torch_version": "2.13.0", "cuda_version": "12.8", "driver_version": "570.86",
              "config_hash": "sha256:ab12", "run_id": "r-7"}
    fill_verification(wb, [
        {"line": "kv_pool", "predicted_bytes": 100, "measured_bytes": 104,
         "residual_bytes": 4, "tolerance_bytes": 8, "verdict": "ok"},
        {"line": "runtime_peak", "predicted_bytes": 100, "measured_bytes": 150,
         "residual_bytes": 50, "tolerance_bytes": 10, "verdict": "over"},
        {"line": "memory_ceiling_requests", "predicted_bytes": 39, "measured_bytes": 38,
         "residual_bytes": -1, "tolerance_bytes": 0, "verdict": "over", "unit": "requests"},
    ], record)
    ws = wb["Verification"]
    assert ws.sheet_state == "visible"
    rows = list(ws.iter_rows(min_row=1, max_row=4, values_only=True))
    assert rows[0] == (*VERIFY_HEADERS, "tolerance_bytes", "line name")
    assert rows[1] == ("kv_pool", 100, 104, 4, "ok", 8, "KV pool (allocated blocks)")
    assert rows[3][-1] == "memory-only ceiling [requests]"
    assert ws["B4"].number_format == style.REQUESTS  # '38 requests', '1 request'
    below = {r[0]: r[1] for r in ws.iter_rows(min_row=6, max_col=2, values_only=True) if r[0]}
    assert below["torch"] == "2.13.0" and below["config hash"] == "sha256:ab12"
    assert below["date (UTC)"] == record["date"] and below["run id"] == "r-7"
    rules = [rule.formula[0] for cf in ws.conditional_formatting for rule in cf.rules]
    assert rules[:2] == ['E2="ok"', 'AND(E2<>"",E2<>"ok",E2<>"reported",E2<>"not measured")']
