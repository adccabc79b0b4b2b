"""simulate/sweep --xlsx: the workbook's Latency record holds the simulated run, nothing else."""

import json
from pathlib import Path

import pytest
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app

RUNNER = CliRunner()
DEVICE = ["teaching-7b", "--device", "80GiB", "--bandwidth", "2000GB/s", "--flops",
          "990TFLOPS"]


def _workload(tmp_path: Path) -> Path:
    doc = {"seed": 3, "num_requests": 80, "arrivals": {"kind": "poisson", "rate_per_s": 3},
           "prompt_tokens": {"kind": "uniform", "low": 50, "high": 600},
           "output_tokens": {"kind": "fixed", "value": 40}}
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(doc))
    return path


def _record(book: Path) -> dict:
    """key column -> the values beside it, read back from the saved file."""
    ws = load_workbook(book)["Latency record"]
    return {row[1]: row[2:] for row in ws.iter_rows(min_row=2, values_only=True) if row[1]}


def test_simulate_fills_the_latency_record(tmp_path):
    book = tmp_path / "sim.xlsx"
    out = RUNNER.invoke(app, ["simulate", *DEVICE, "--workload", str(_workload(tmp_path)),
                              "--policy", "chunked-prefill", "--slo-ttft", "500ms",
                              "--json", "--xlsx", str(book)])
    assert out.exit_code == 0, out.output
    entry = json.loads(out.stdout)["policies"][0]
    record = _record(book)
    assert record["ttft_ms"] == tuple(entry["ttft_ms"][p] for p in ("p50", "p95", "p99"))
    assert record["queue_delay_ms"][2] == entry["queue_ms"]["p99"]
    assert record["itl_ms"][0] == entry["itl_ms"]["p50"]
    assert record["input_tokens_per_s"][0] == pytest.approx(entry["input_tokens_per_s"])
    assert record["output_tokens_per_s"][0] == pytest.approx(entry["output_tokens_per_s"])
    assert record["slo"][0] == "TTFT <= 500 ms"
    assert "chunked-prefill" in record["source"][0]
    assert record["tokenizer_revision"][0] is None  # not known to a simulation: left blank


def test_sweep_records_the_capacity_point(tmp_path):
    book = tmp_path / "sweep.xlsx"
    out = RUNNER.invoke(app, ["sweep", *DEVICE, "--workload", str(_workload(tmp_path)),
                              "--slo-ttft", "500ms", "--rates", "1,2,3", "--json",
                              "--xlsx", str(book)])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    point = report["capacity_point"]  # the run at the bisected capacity
    assert point["rate_per_s"] == report["capacity_rps"]
    record = _record(book)
    assert record["e2e_ms"][1] == point["e2e_ms"]["p95"]
    assert record["achieved_rate"][0] == pytest.approx(point["achieved_rps"])
    assert "capacity" in record["source"][0]
    ws = load_workbook(book)["Latency record"]
    rows = list(ws.iter_rows(values_only=True))
    start = next(i for i, r in enumerate(rows) if r[0] == "offered req/s") + 1
    envelope = rows[start:]
    assert [r[0] for r in envelope] == [p["rate_per_s"] for p in report["points"]]
    assert [r[9] for r in envelope] == [p["meets_slo"] for p in report["points"]]
    assert [r[7] for r in envelope] == [p["tpot_ms"]["p99"] for p in report["points"]]
    assert ws.freeze_panes == "A2"


def test_xlsx_is_checked_before_simulating(tmp_path):
    workload = _workload(tmp_path)
    existing = tmp_path / "old.xlsx"
    existing.write_bytes(b"keep")
    for args, needle in (
            (["--xlsx", str(existing)], "file exists; pass --force"),
            (["--xlsx", str(tmp_path / "no" / "x.xlsx")], "existing folder"),
            (["--xlsx", str(tmp_path / "x.xlsx"), "--policy", "static", "--policy",
              "continuous"], "give one --policy")):
        out = RUNNER.invoke(app, ["simulate", *DEVICE, "--workload", str(workload), *args])
        assert out.exit_code == 2 and needle in out.output, out.output
    assert existing.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.xlsx", "w.yaml"]


def test_sweep_workbook_offered_rate_is_its_source_lines_and_the_slos_are_drawn(tmp_path):
    book = tmp_path / "sweep.xlsx"
    out = RUNNER.invoke(app, ["sweep", *DEVICE, "--workload", str(_workload(tmp_path)),
                              "--slo-ttft", "500ms", "--slo-tpot", "30ms", "--rates",
                              "1.234,2.5", "--json", "--xlsx", str(book)])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    capacity = report["capacity_rps"]
    record = _record(book)
    assert record["offered_rate"][0] == capacity  # the simulated rate, not the sampled arrivals'
    assert f"{capacity:.2f} req/s offered" in record["source"][0]
    ws = load_workbook(book)["Latency record"]
    rows = list(ws.iter_rows(values_only=True))
    header = next(r for r in rows if r[0] == "offered req/s")
    start = rows.index(header) + 1
    ttft_col, tpot_col = header.index("SLO TTFT p99 [ms]"), header.index("SLO TPOT p99 [ms]")
    assert "SLO e2e p99 [ms]" not in header and "SLO ITL p99 [ms]" not in header
    # a flat line from the lowest to the highest rate: two points each
    assert [r[ttft_col] for r in rows[start:start + 2]] == [500, 500]
    assert [r[tpot_col] for r in rows[start:start + 2]] == [30, 30]  # --slo-tpot on TPOT p99


def test_a_tensor_parallel_simulation_writes_the_tensor_parallel_plan(tmp_path) -> None:
    """simulate -tp 4 --xlsx wrote a one-device workbook (141 GB of weights on one H100, no
    Ranks sheet); its plan is the one simulate ran, line for line."""
    book = tmp_path / "tp4.xlsx"
    args = ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4", "--workload",
            str(_workload(tmp_path))]
    out = RUNNER.invoke(app, ["simulate", *args, "--json", "--xlsx", str(book)])
    assert out.exit_code == 0, out.output
    memory = json.loads(out.stdout[:out.stdout.rindex("}") + 1])["memory"]
    assert "Ranks" in load_workbook(book).sheetnames
    again = RUNNER.invoke(app, ["plan", "--from-workbook", str(book), "--json"])
    replanned = json.loads(again.stdout)
    assert replanned["tensor_parallel_size"] == 4
    assert replanned["committed_bytes"] == memory["committed_bytes"]
    assert replanned["weights_bytes"] == memory["weights_bytes"]
