"""Every output file: replaced only with --force, readable under the umask, and text from the
inputs written as text (never a spreadsheet formula)."""

import csv
import os
import stat
from pathlib import Path

import pytest

CHAT = (Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml").read_text()
SIM = ("simulate", "teaching-7b", "--device", "h100-80gb")
INJECTION = '=HYPERLINK("http://x","click")'
MODEL = ("name: m\nsource: '" + INJECTION.replace("'", "''") + "'\nmodel_type: llama\n"
         "hidden_size: 64\nintermediate_size: 128\nvocab_size: 100\nnum_attention_heads: 4\n"
         "num_key_value_heads: 2\nnum_hidden_layers: 2\n")


def _workload(tmp_path, group: str = "system-prompt") -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(CHAT.replace("num_requests: 2000", "num_requests: 40")
                    .replace("name: system-prompt", f"name: '{group}'"))
    return path


@pytest.mark.parametrize("flag", ["--records", "--token-times"])
def test_simulate_csvs_need_force_to_replace(run, tmp_path, flag) -> None:
    target = tmp_path / "out.csv"
    target.write_text("keep me")
    result = run(*SIM, "--workload", _workload(tmp_path), flag, target)
    assert result.exit_code == 2 and "pass --force" in result.stderr
    assert target.read_text() == "keep me"
    assert run(*SIM, "--workload", _workload(tmp_path), flag, target, "--force").exit_code == 0
    assert target.read_text().startswith("policy") or "," in target.read_text()


def test_calibration_out_needs_force_before_anything_runs(run, tmp_path) -> None:
    target = tmp_path / "coeffs.json"
    target.write_text("{}")
    result = run("verify", "tiny-llama", "--device", "cpu", "--calibration-out", target)
    assert result.exit_code == 2 and "--calibration-out" in result.stderr
    assert "pass --force" in result.stderr and target.read_text() == "{}"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_files_take_the_umask_mode(run, tmp_path, umask_022) -> None:
    pytest.importorskip("openpyxl")
    xlsx, records = tmp_path / "plan.xlsx", tmp_path / "records.csv"
    assert run("plan", "teaching-7b", "--xlsx", xlsx).exit_code == 0
    assert run(*SIM, "--workload", _workload(tmp_path), "--records", records).exit_code == 0
    assert _mode(xlsx) == 0o644 and _mode(records) == 0o644


def test_a_formula_in_a_model_file_is_text_in_the_workbook(run, tmp_path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    model, xlsx = tmp_path / "m.yaml", tmp_path / "plan.xlsx"
    model.write_text(MODEL)
    result = run("plan", model, "--device", "1GiB", "--context", "8", "--xlsx", xlsx)
    assert result.exit_code == 0, result.output
    cells = [c for row in openpyxl.load_workbook(xlsx)["Inputs"].iter_rows() for c in row
             if c.value == INJECTION]
    assert cells and all(c.data_type == "s" for c in cells)


def test_a_formula_as_a_prefix_group_name_is_text_in_the_csv(run, tmp_path) -> None:
    records = tmp_path / "records.csv"
    result = run(*SIM, "--workload", _workload(tmp_path, "=1+2"), "--records", records)
    assert result.exit_code == 0, result.output
    values = {v for row in csv.reader(records.open()) for v in row}
    assert "'=1+2" in values and "=1+2" not in values


@pytest.mark.parametrize(("args", "field"), [
    (("workbook", "llama-3.1-8b", "--device", "40GiB", "-o"), "--output"),
    (("plan", "llama-3.1-8b", "--device", "40GiB", "--context", "4096", "--xlsx"), "--xlsx"),
    ((*SIM, "--input-len", "10", "--output-len", "4", "--num-requests", "2", "--xlsx"),
     "--xlsx"),
    (("sweep", "teaching-7b", "--device", "h100-80gb", "--input-len", "10", "--output-len",
      "4", "--num-requests", "2", "--xlsx"), "--xlsx"),
    (("verify", "tiny-llama", "--device", "cpu", "--xlsx"), "--xlsx"),
    (("search", "llama-3.1-8b", "--workload", "workloads/chat.yaml", "--rate", "4",
      "--devices", "h100-80gb", "--xlsx"), "--xlsx"),
    (("load", "http://127.0.0.1:9/v1", "--model", "m", "--workload", "workloads/chat.yaml",
      "--sweep", "--slo-ttft", "1s", "--xlsx"), "--xlsx"),
])
@pytest.mark.parametrize("name", ["out.csv", "out.xls", "out"])
def test_a_workbook_is_written_only_under_an_xlsx_name(run, tmp_path, args, field, name):
    """`workbook -o out.csv` wrote an Excel workbook (a zip) under a .csv name, rc 0."""
    target = tmp_path / name
    result = run(*args, target)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"servecap: error: {field} = '{target}': a workbook's name "
                                     "ends in .xlsx (it is written as an Excel workbook), e.g. "
                                     "out.xlsx")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_an_upper_case_xlsx_name_is_a_workbook_name(run, tmp_path) -> None:
    target = tmp_path / "OUT.XLSX"
    assert run("workbook", "llama-3.1-8b", "--device", "40GiB", "-o", target).exit_code == 0
    assert target.read_bytes()[:2] == b"PK"
