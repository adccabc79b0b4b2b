"""A workbook records its scenario (the Scenario sheet) and --from-workbook / --scenario
FILE.xlsx read it back: the fields no Inputs cell holds survive the round trip, also through
LibreOffice; an Inputs cell edited since wins (and -v says so); a workbook without the sheet
still plans from its Inputs; a bad record is one line naming the file, the field and the value."""

import json
from pathlib import Path

import pytest
import yaml
from conftest import recalc, soffice
from hypothesis import given
from hypothesis import strategies as st
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.workbook_scenario import yaml_text
from servecap.scenario.spec import paths
from servecap.workbooks.names import cell_of
from servecap.workbooks.scenario_sheet import FIELD

RUNNER = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHAT = str(ROOT / "workloads" / "chat.yaml")
# fields no Inputs cell holds: a pinned release, scheduler knobs, SLOs, prices, the workload
VLLM_PLAN = ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4", "--engine",
             "vllm==0.11", "--gpu-memory-utilization", "0.85", "--max-num-seqs", "64",
             "--context", "16384"]
SIM = ["llama-3.1-8b", "--device", "h100-80gb", "--workload", CHAT, "--policy",
       "chunked-prefill", "--slo-ttft", "500ms", "--slo-tpot", "40ms", "--num-requests", "150",
       "--max-num-seqs", "96"]


def _run(*args: str, codes=(0, 1)):
    result = RUNNER.invoke(app, [str(a) for a in args])
    assert result.exit_code in codes, result.output
    return result


def _rows(book: Path) -> dict[str, tuple]:
    ws = load_workbook(book)["Scenario"]
    return {row[0]: row[1:3] for row in ws.iter_rows(min_row=2, max_col=3, values_only=True)
            if FIELD.fullmatch(str(row[0]))}


def _edit(book: Path, target: Path, cells: dict | None = None, fields: dict | None = None):
    wb = load_workbook(book)
    for name, value in (cells or {}).items():
        cell_of(wb, name).value = value
    for row in wb["Scenario"].iter_rows(min_row=2, max_col=2):
        if row[0].value in (fields or {}):
            row[1].value = fields[row[0].value]
    wb.save(target)
    return target


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """A vLLM plan's and a simulation's workbooks with their saved scenarios and JSON, and
    each as LibreOffice saved it again (one soffice run for both)."""
    folder = tmp_path_factory.mktemp("scenario-books")
    out = {}
    for name, args in (("plan", ["plan", *VLLM_PLAN]), ("simulate", ["simulate", *SIM])):
        book, saved = folder / f"{name}.xlsx", folder / f"{name}.yaml"
        result = _run(*args, "--json", "--xlsx", book, "--save-scenario", saved)
        out[name] = (book, saved, result.stdout)
    saved_again = recalc(soffice(), [b for b, _, _ in out.values()], folder / "libreoffice")
    return out, saved_again


def test_every_field_is_recorded_as_the_saved_scenario_writes_it(books) -> None:
    book, saved, _ = books[0]["simulate"]
    rows = _rows(book)
    assert list(rows) == list(paths())
    written = yaml.safe_load(saved.read_text())
    for path, (value, _) in rows.items():
        section, name = path.split(".")
        assert yaml.safe_load(value) == written[section][name], path
    assert rows["slo.ttft"] == ("500ms", "--slo-ttft (command line)")
    assert rows["workload.file"][0] == CHAT  # an absolute path stays as it is
    assert rows["scheduler.max_model_len"][1].startswith("default; in effect: ")
    assert rows["speculative.acceptance"] == ("0.7", "default")


@pytest.mark.parametrize("kind", ["openpyxl", "libreoffice"])
def test_plan_from_the_workbook_is_the_plan_that_wrote_it(books, kind, tmp_path) -> None:
    made, again = books
    book, saved, printed = made["plan"]
    source = book if kind == "openpyxl" else again["plan"]
    resaved = tmp_path / "again.yaml"
    result = _run("plan", "--from-workbook", source, "--json", "--save-scenario", resaved)
    assert result.stdout == printed
    assert yaml.safe_load(resaved.read_text()) == yaml.safe_load(saved.read_text())
    assert json.loads(printed)["engine"].startswith("vllm")


@pytest.mark.parametrize("kind", ["openpyxl", "libreoffice"])
def test_simulate_from_the_workbook_runs_the_same_simulation(books, kind) -> None:
    made, again = books
    book, _, printed = made["simulate"]
    source = book if kind == "openpyxl" else again["simulate"]
    assert _run("simulate", "--scenario", source, "--json").stdout == printed


def test_a_relative_workload_is_recorded_from_the_workbooks_folder(tmp_path,
                                                                   monkeypatch) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "books").mkdir()
    (tmp_path / "w" / "chat.yaml").write_text(Path(CHAT).read_text())
    monkeypatch.chdir(tmp_path)
    args = [a if a != CHAT else "w/chat.yaml" for a in SIM]
    first = _run("simulate", *args, "--json", "--xlsx", "books/s.xlsx").stdout
    assert _rows(tmp_path / "books" / "s.xlsx")["workload.file"][0] == "../w/chat.yaml"
    monkeypatch.chdir(tmp_path / "books")
    again = json.loads(_run("simulate", "--scenario", "s.xlsx", "--json").stdout)
    assert again.pop("source") == "../w/chat.yaml"  # the same file, from here
    assert again == {k: v for k, v in json.loads(first).items() if k != "source"}


def test_plan_from_a_simulation_workbook_is_plan_of_its_scenario(books) -> None:
    book, saved, _ = books[0]["simulate"]
    assert _run("plan", "--from-workbook", book, "--json").stdout == _run(
        "plan", "--scenario", saved, "--json").stdout


def test_the_prices_of_a_cost_run_survive_a_workbook(tmp_path) -> None:
    saved, book = tmp_path / "c.yaml", tmp_path / "c.xlsx"
    first = _run("cost", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "512",
                 "--output-len", "64", "--num-requests", "120", "--gpu-price", "3",
                 "--api-price", "0.5", "--json", "--save-scenario", saved).stdout
    _run("workbook", "--scenario", saved, "-o", book)
    assert _rows(book)["prices.usd_per_gpu_hour"] == ("3.0", str(saved))
    assert _run("cost", "--scenario", book, "--json").stdout == first


def test_an_edited_inputs_cell_wins_and_verbose_says_which(books, tmp_path) -> None:
    book, _, _ = books[0]["plan"]
    edited = _edit(book, tmp_path / "edited.xlsx", {"context_tokens": 4096},
                   {"scheduler.max_model_len": "32768", "scheduler.max_num_seqs": "32"})
    result = _run("plan", "--from-workbook", edited, "--json", "-v")
    flagged = _run("plan", "llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4",
                   "--engine", "vllm==0.11", "--gpu-memory-utilization", "0.85",
                   "--max-num-seqs", "32", "--context", "4096", "--json")
    assert result.stdout == flagged.stdout  # the Scenario sheet's edit, the Inputs' over it
    assert (f"scheduler.max_model_len: Inputs!context_tokens 4096 (edited in the workbook) "
            f"over {edited}'s Scenario sheet 32768") in result.stderr
    assert json.loads(result.stdout)["context_tokens"] == 4096


def test_a_flag_beside_a_workbook_scenario_wins_over_both(books, tmp_path) -> None:
    book, _, _ = books[0]["plan"]
    edited = _edit(book, tmp_path / "edited.xlsx", {"context_tokens": 4096})
    result = _run("plan", "--scenario", edited, "--context", "2048", "--json", "-v")
    assert json.loads(result.stdout)["context_tokens"] == 2048
    assert f"--context 2048 (command line) over {edited}'s 4096" in result.stderr


def test_a_workbook_without_a_scenario_sheet_plans_its_inputs(tmp_path) -> None:
    book = tmp_path / "old.xlsx"
    direct = _run("plan", "llama-3.1-8b", "--device", "40GiB", "--context", "8192", "--json",
                  "--xlsx", book).stdout
    wb = load_workbook(book)
    wb.remove(wb["Scenario"])
    del wb.defined_names["inputs_as_written"]
    wb.save(book)
    assert _run("plan", "--from-workbook", book, "--json").stdout == direct
    assert "no Scenario sheet" in _run("plan", "--scenario", book, "--json", "-v").stderr


def test_a_workbook_written_from_a_workbook_records_the_edit_as_its_source(books,
                                                                        tmp_path) -> None:
    book, _, _ = books[0]["plan"]
    edited = _edit(book, tmp_path / "edited.xlsx", {"requests": 3})
    second = tmp_path / "second.xlsx"
    _run("workbook", "--scenario", edited, "-o", second)
    rows = _rows(second)
    assert rows["load.concurrency"] == ("3", f"Inputs!requests (edited in {edited.name})")
    assert rows["engine.version"][1] == str(edited)


BAD = [
    ({"scheduler.max_model_len": "lots"}, "Scenario!scheduler.max_model_len = 'lots': "
     "should be a valid integer"),
    ({"memory.gpu_memory_utilization": "1.5"}, "Scenario!memory.gpu_memory_utilization = "
     "1.5: should be less than or equal to 1"),
    ({"slo.ttft": "[500ms"}, "Scenario!slo.ttft = '[500ms': a YAML value"),
    ({"engine.version": "0.11"}, "Scenario!engine.version = 0.11: should be a valid string"),
]


@pytest.mark.parametrize(("fields", "needle"), BAD)
@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_a_bad_recorded_value_is_one_line_naming_file_field_and_value(books, tmp_path, fields,
                                                                      needle, command) -> None:
    bad = _edit(books[0]["plan"][0], tmp_path / "bad.xlsx", fields=fields)
    flag = "--from-workbook" if command == "plan" else "--scenario"
    result = _run(command, flag, bad, codes=(2,))
    assert result.stderr.startswith(f"servecap: error: {bad}: {needle}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_an_unknown_field_row_or_a_lost_snapshot_is_one_line(books, tmp_path) -> None:
    book = books[0]["plan"][0]
    wb = load_workbook(book)
    wb["Scenario"].append(["scheduler.bogus", "1", "typed by hand"])
    wb.save(tmp_path / "unknown.xlsx")
    result = _run("plan", "--from-workbook", tmp_path / "unknown.xlsx", codes=(2,))
    assert "Scenario!scheduler.bogus = 1: unknown key; allowed: max_model_len" in result.stderr
    wb = load_workbook(book)
    cell_of(wb, "inputs_as_written").value = "{not json"
    wb.save(tmp_path / "lost.xlsx")
    result = _run("plan", "--from-workbook", tmp_path / "lost.xlsx", codes=(2,))
    assert "Scenario!inputs_as_written = '{not json'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_an_edited_model_cell_is_refused_against_the_record(books, tmp_path) -> None:
    bad = _edit(books[0]["plan"][0], tmp_path / "layers.xlsx", {"num_layers": 40})
    result = _run("plan", "--from-workbook", bad, codes=(2,))
    assert "Inputs!num_layers = 40: comes from the model (80 for" in result.stderr


def test_a_search_workbook_records_its_search_and_runs_it_again(tmp_path) -> None:
    book = tmp_path / "search.xlsx"
    args = ["llama-3.1-8b", "--workload", CHAT, "--rate", "4", "--slo-ttft", "1s",
            "--slo-tpot", "50ms", "--devices", "h100-80gb", "--max-gpus", "2", "--tp", "1",
            "--num-requests", "100", "--no-capacity"]
    first = json.loads(_run("search", *args, "--workers", "1", "--json", "--xlsx",
                            book).stdout)
    rows = _rows(book)
    assert rows["search.devices"] == ("h100-80gb", "--devices (command line)")
    assert rows["search.capacity"] == ("false", "--no-capacity (command line)")
    again = json.loads(_run("search", "--scenario", book, "--workers", "1", "--json").stdout)
    for report in (first, again):  # wall and CPU time: the figures measured on each run
        report.pop("elapsed_s"), report["space"].pop("worker_cpu_s")
    assert again == first


SCALARS = st.none() | st.booleans() | st.integers(-2**62, 2**62) | st.text(max_size=40) | \
    st.floats(allow_nan=False, allow_infinity=False)


@given(st.one_of(SCALARS, st.lists(st.integers(1, 10**6) | st.text(max_size=12), max_size=5)))
def test_a_value_cell_reads_back_as_the_value_written(value) -> None:
    """Text that reads as a number, a boolean or null ('1', 'true', 'null') is quoted."""
    text = yaml_text(value)
    assert "\n" not in text and yaml.safe_load(text) == value


def test_another_model_typed_in_is_refused_while_the_cells_are_the_old_ones(books,
                                                                          tmp_path) -> None:
    bad = _edit(books[0]["plan"][0], tmp_path / "model.xlsx", {"model": "qwen2.5-7b"})
    result = _run("plan", "--from-workbook", bad, codes=(2,))
    assert "Inputs!" in result.stderr and "comes from the model" in result.stderr
    assert "(edited" not in result.stderr and "Traceback" not in result.output


def test_a_line_over_a_scenario_file_credits_each_field_to_the_one_that_set_it(tmp_path):
    """A field the file set and the pasted line left alone keeps the file as its source."""
    file = tmp_path / "s.yaml"
    file.write_text("slo:\n  ttft: 2s\n")
    book = tmp_path / "w.xlsx"
    _run("plan", "--device", "h100-80gb", "--scenario", file, "--xlsx", book, "--",
         "vllm", "serve", "llama-3.1-8b", "-tp", "2")
    rows = _rows(book)
    assert rows["slo.ttft"] == ("2s", str(file))
    assert rows["parallel.tensor_parallel_size"] == ("2", "vllm serve line")
    assert rows["model.name"] == ("llama-3.1-8b", "vllm serve line")
