"""The CLI: plan --xlsx, plan --from-workbook (plan -> workbook -> plan is identity), workbook."""

import json
import subprocess
import sys
import zipfile

import pytest
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.workbooks.names import cell_of

RUNNER = CliRunner()
ROUND_TRIPS = {
    "defaults": ["llama-3.1-8b", "--device", "40GiB"],
    "seed-teaching": ["teaching-7b"],
    "quantized-share": ["llama-3.1-8b", "--device", "h100-80gb", "--weight-dtype", "int4",
                        "--kv-dtype", "fp8", "--safety", "7.5%", "--context", "32768",
                        "--concurrency", "9", "--block-size", "32"],
    "lengths-prefix": ["gpt-oss-20b", "--device", "40GiB", "--lengths", "100,300,5000,5000",
                       "--shared-prefix", "100", "--runtime-peak", "2GiB"],
    "mla-does-not-fit": ["deepseek-v3", "--device", "80GiB", "--context", "8192"],
    "batched-tokens": ["qwen3-30b-a3b", "--device", "96GiB", "--max-num-batched-tokens",
                       "2048", "--activation-dtype", "fp16", "--safety", "3GiB"],
    "hybrid-state": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "--context", "32768"],
    "hybrid-indexer-lengths": ["deepseek-v3.2", "--device", "2TiB", "--lengths", "100,5000"],
    "hybrid-chunked-vllm": ["llama-4-scout-17b-16e-instruct", "--device", "h100-80gb", "-tp",
                            "4", "--engine", "vllm", "--context", "20000"],
    "hybrid-mamba-tp2": ["nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "-tp", "2",
                         "--engine", "vllm", "--kv-dtype", "fp8"],
}


def _plan_json(*args: str) -> tuple[int, dict]:
    result = RUNNER.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("case", sorted(ROUND_TRIPS))
def test_plan_workbook_plan_is_the_identity(case, tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    code, direct = _plan_json(*ROUND_TRIPS[case], "--xlsx", str(book))
    again_code, again = _plan_json("--from-workbook", str(book))
    assert again == direct and again_code == code


def test_an_edited_context_replans_like_the_flag(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    _plan_json("llama-3.1-8b", "--device", "40GiB", "--context", "4096", "--xlsx", str(book))
    wb = load_workbook(book)
    cell_of(wb, "context_tokens").value = 12000
    cell_of(wb, "runtime_peak_bytes").value = 3 * 2**30
    wb.save(book)
    _, edited = _plan_json("--from-workbook", str(book))
    _, flagged = _plan_json("llama-3.1-8b", "--device", "40GiB", "--context", "12000",
                            "--runtime-peak", "3GiB")
    assert edited == flagged and edited["context_tokens"] == 12000


def test_an_edited_model_cell_is_refused_with_its_name(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    _plan_json("qwen2.5-7b", "--device", "40GiB", "--xlsx", str(book))
    wb = load_workbook(book)
    cell_of(wb, "num_layers").value = 20
    wb.save(book)
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(book)])
    assert result.exit_code == 2
    assert "Inputs!num_layers" in result.stderr and "model file" in result.stderr
    assert "Traceback" not in result.output


def test_an_edited_hybrid_replans_like_the_flags(tmp_path) -> None:
    book = tmp_path / "hybrid.xlsx"
    _plan_json("nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "--xlsx", str(book))
    wb = load_workbook(book)
    cell_of(wb, "context_tokens").value = 200000
    cell_of(wb, "requests").value = 3
    cell_of(wb, "kv_dtype").value = "fp8"
    wb.save(book)
    _, edited = _plan_json("--from-workbook", str(book))
    _, flagged = _plan_json("nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "--context",
                            "200000", "--concurrency", "3", "--kv-dtype", "fp8")
    assert edited == flagged and edited["state_bytes_total"] == 3 * edited[
        "state_bytes_per_request"] > 0


@pytest.mark.parametrize("name, value, said", [
    ("state_conv_dim", 1, "model file"), ("indexer_head_dim", 64, "model file"),
    ("mamba_cache_mode", "all", "no plan flag sets another mode")])
def test_an_edited_hybrid_shape_is_refused_with_its_name(tmp_path, name, value, said) -> None:
    model = "deepseek-v3.2" if name.startswith("indexer") else "qwen3.6-35b-a3b"
    book = tmp_path / "hybrid.xlsx"
    _plan_json(model, "--device", "2TiB", "--xlsx", str(book))
    wb = load_workbook(book)
    cell_of(wb, name).value = value
    wb.save(book)
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(book)])
    assert result.exit_code == 2 and f"Inputs!{name}" in result.stderr
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_not_a_workbook_is_a_one_line_error(tmp_path) -> None:
    bad = tmp_path / "notes.xlsx"
    bad.write_text("not a zip")
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(bad)])
    assert result.exit_code == 2 and "not a readable .xlsx" in result.stderr


def test_plan_without_a_model_or_workbook_says_so() -> None:
    result = RUNNER.invoke(app, ["plan", "--device", "40GiB"])
    assert result.exit_code == 2 and "MODEL" in result.stderr


def test_plan_xlsx_refuses_to_overwrite_without_force(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    book.write_bytes(b"keep me")
    args = ["plan", "llama-3.1-8b", "--device", "40GiB", "--xlsx", str(book)]
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2 and "--force" in result.stderr
    assert book.read_bytes() == b"keep me"
    assert RUNNER.invoke(app, [*args, "--force"]).exit_code == 0
    assert zipfile.is_zipfile(book)


def test_plan_xlsx_says_what_it_wrote_on_stderr_keeping_json_clean(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    result = RUNNER.invoke(app, ["plan", "llama-3.1-8b", "--device", "40GiB", "--json",
                                 "--xlsx", str(book)])
    assert result.exit_code == 0 and f"wrote {book}" in result.stderr
    assert json.loads(result.stdout)["device_bytes"] == 40 * 2**30


def test_workbook_command_sweeps_devices_and_contexts(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    args = ["workbook", "llama-3.1-8b", "--device", "40GiB", "--device", "80GiB",
            "--context", "4096", "--context", "32768", "--kv-dtype", "fp8", "--kv-dtype",
            "bf16", "-o", str(book)]
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 0, result.output
    wb = load_workbook(book)
    assert cell_of(wb, "context_tokens").value == 4096
    assert cell_of(wb, "device_bytes").value == 40 * 2**30
    assert cell_of(wb, "kv_dtype").value == "fp8"
    rows = list(wb["Envelope"].iter_rows(min_row=2, max_col=5, values_only=True))
    assert [(r[0], r[2], r[4]) for r in rows] == [
        (kv, ctx, dev) for kv in ("fp8", "bf16") for ctx in (4096, 32768)
        for dev in (40 * 2**30, 80 * 2**30)]
    (chart,) = wb["Envelope"]._charts
    assert len(chart.series) == 4, "one line per device and KV dtype"
    again = RUNNER.invoke(app, args)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert RUNNER.invoke(app, [*args, "--force"]).exit_code == 0


def test_workbook_rejects_a_bad_kv_dtype_before_writing(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    result = RUNNER.invoke(app, ["workbook", "llama-3.1-8b", "--device", "40GiB",
                                 "--kv-dtype", "fp5", "-o", str(book)])
    assert result.exit_code == 2 and "fp5" in result.stderr and not book.exists()


_IMPORTS = """
import sys
from servecap.cli.app import app
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print("HEAVY=" + ",".join(sorted({m.split(".")[0] for m in sys.modules} & {"openpyxl", "pandas"})))
"""


def _heavy_imports(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", _IMPORTS, *args], capture_output=True,
                          text=True, timeout=60, check=True)
    marker = [line for line in done.stdout.splitlines() if line.startswith("HEAVY=")]
    assert len(marker) == 1, done.stdout + done.stderr
    return marker[0].removeprefix("HEAVY=")


def test_plain_plan_imports_neither_openpyxl_nor_pandas(tmp_path) -> None:
    assert _heavy_imports("plan", "llama-3.1-8b", "--device", "40GiB", "--json") == ""
    book = tmp_path / "c.xlsx"
    assert "openpyxl" in _heavy_imports("plan", "llama-3.1-8b", "--device", "40GiB",
                                        "--json", "--xlsx", str(book))


def test_from_workbook_with_other_flags_is_refused(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    _plan_json("llama-3.1-8b", "--device", "40GiB", "--xlsx", str(book))
    for extra in (["llama-3.1-8b"], ["--device", "80GiB"]):
        result = RUNNER.invoke(app, ["plan", *extra, "--from-workbook", str(book)])
        assert result.exit_code == 2 and "Inputs sheet" in result.stderr


def _damaged(tmp_path, damage) -> str:
    book = tmp_path / "capacity.xlsx"
    assert RUNNER.invoke(app, ["plan", "llama-3.1-8b", "--device", "40GiB", "--xlsx",
                               str(book)]).exit_code == 0
    wb = load_workbook(book)
    damage(wb)
    wb.save(book)
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(book)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servecap: error: "), result.output
    return lines[0]


def _set(name, value):
    def damage(wb):
        cell_of(wb, name).value = value
    return damage


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda wb: wb.remove(wb["Inputs"]), "no defined name 'device_bytes' pointing at a cell"),
    (_set("context_tokens", "lots"), "Inputs!context_tokens = 'lots': a whole number >= 1"),
    (_set("requests", -4), "Inputs!requests = -4: a whole number >= 1"),
    (_set("device_bytes", None), "Inputs!device_bytes is missing"),
    (_set("block_size_tokens", 12.5), "Inputs!block_size_tokens = 12.5"),
])
def test_a_damaged_workbook_is_a_one_line_error(tmp_path, damage, needle) -> None:
    assert needle in _damaged(tmp_path, damage)


def test_a_folder_is_not_a_workbook(tmp_path) -> None:
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a readable .xlsx workbook" in result.output


def test_workbook_rejects_a_zero_byte_device_before_writing(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    result = RUNNER.invoke(app, ["workbook", "llama-3.1-8b", "--device", "40GiB",
                                 "--device", "0GiB", "-o", str(book)])
    assert result.exit_code == 2 and "--device = '0GiB'" in result.stderr and not book.exists()


def test_a_number_pasted_as_text_is_read_as_the_number(tmp_path) -> None:
    book = tmp_path / "capacity.xlsx"
    _, direct = _plan_json("llama-3.1-8b", "--device", "40GiB", "--context", "8192",
                           "--xlsx", str(book))
    wb = load_workbook(book)
    cell_of(wb, "context_tokens").value = "8,192"
    wb.save(book)
    _, again = _plan_json("--from-workbook", str(book))
    assert again["memory_ceiling_requests"] == direct["memory_ceiling_requests"]
    assert again["context_tokens"] == 8192


def test_workbook_command_exports_a_deployment(tmp_path) -> None:
    book = tmp_path / "70b.xlsx"
    result = RUNNER.invoke(app, ["workbook", "llama-3.1-70b-instruct", "--device", "h100-80gb",
                                 "-tp", "4", "--engine", "vllm", "-o", str(book)])
    assert result.exit_code == 0, result.output
    wb = load_workbook(book)
    assert "Ranks" in wb.sheetnames and cell_of(wb, "tensor_parallel_size").value == 4
    _, direct = _plan_json("llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4",
                           "--engine", "vllm")
    _, again = _plan_json("--from-workbook", str(book))
    assert again == direct


@pytest.mark.parametrize(("args", "noted"), [
    (["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "2", "--engine", "vllm",
      "--context", "8192"], True),
    (["llama-3.1-8b", "--device", "h100-80gb"], False)])
def test_the_envelope_of_a_multi_gpu_plan_says_whose_ceiling_it_is(tmp_path, args,
                                                                   noted) -> None:
    """The Envelope's formulas plan the whole model on one device with the plain engine: for
    a 70B at tp 2 every such row is 0 requests, which a note under the table says, beside the
    deployment on Ranks, which the chart then plots (test_envelope_deployment.py)."""
    book = tmp_path / "p.xlsx"
    assert RUNNER.invoke(app, ["plan", *args, "--xlsx", str(book)]).exit_code == 0
    sheet = load_workbook(book)["Envelope"]
    texts = [c.value for row in sheet.iter_rows(max_col=1) for c in row
             if isinstance(c.value, str)]
    said = [t for t in texts if "whole model on one device" in t and "on Ranks" in t]
    assert bool(said) == noted, texts[-3:]
    # the ceiling column and the chart say whose ceiling it is even without reading the note
    assert sheet["H1"].value == "memory-only ceiling, one GPU, whole model [requests]"
    (chart,) = sheet._charts
    title = "".join(run.t for par in chart.title.tx.rich.p for run in par.r or ())
    whose = "deployment tp 2 x pp 1, vllm" if noted else "one GPU, whole model"
    assert whose in title, title
    if noted:  # the note prints with the table, its last column the deployment's reason
        note_row = next(c.row for row in sheet.iter_rows(max_col=1) for c in row
                        if c.value == said[0])
        area = str(sheet.print_area)
        assert f"$K${note_row}" in area, (area, note_row)
