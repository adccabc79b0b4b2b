"""`servecap search` end to end: exit codes, one-line errors, JSON, 80 columns, workbook."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

SMALL = ("--devices", "l4-24gb,a100-80gb", "--tp", "1,2", "--max-gpus", "4",
         "--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--disaggregate", "1:1",
         "--workers", "1", "--no-capacity")


def search(workload_file, *args, env=None):
    return CliRunner().invoke(app, ["search", "llama-3.1-8b", "--workload", str(workload_file),
                                    *(str(a) for a in args)], env=env)


@pytest.fixture(scope="module")
def report(workload_file) -> dict:
    out = search(workload_file, "--rate", 6, "--slo-ttft", "500ms", "--slo-itl", "30ms",
                 *SMALL, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_json_report_answers_the_question(report) -> None:
    best = report["cheapest"]
    assert best["meets_slo"] and best["cost_usd_per_hour"] > 0
    assert report["binding_constraint"] is None
    for key in ("cost_usd_per_hour", "num_gpus", "tokens_per_s_per_gpu",
                "tokens_per_s_per_user", "ttft_ms", "tpot_ms", "goodput_rps",
                "slo_attainment"):
        assert key in best
    assert set(best["ttft_ms"]) == {"p50", "p99"}
    assert report["prices"]["l4-24gb"]["source"].startswith("servecap default")
    assert report["candidates"][0] == best


def test_launch_lines_carry_every_vllm_flag(report) -> None:
    (vllm,) = report["launch"]["vllm"]
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--max-num-seqs 64",
                 "--max-num-batched-tokens 2048", "--max-model-len",
                 "--kv-cache-dtype auto", "--gpu-memory-utilization 0.92"):
        assert flag in vllm
    assert vllm.startswith("vllm serve meta-llama/Llama-3.1-8B") or "vllm serve" in vllm
    (sglang,) = report["launch"]["sglang"]
    assert "--tp-size" in sglang and "--max-running-requests 64" in sglang
    (trt,) = report["launch"]["trtllm"]
    assert "--tp_size" in trt and "--max_batch_size 64" in trt


def test_disaggregated_frontier_point_launches_two_pools(report) -> None:
    split = [r for r in report["frontier"] + report["candidates"]
             if r["mode"] == "disaggregated" and r["meets_slo"] and "launch" in r]
    for row in split:
        prefill, decode = row["launch"]["vllm"]
        assert "prefill pool" in prefill and "decode pool" in decode
        assert "--disaggregation-mode decode" in row["launch"]["sglang"][1]


def test_table_fits_80_columns(workload_file) -> None:
    out = search(workload_file, "--rate", 6, "--slo-ttft", "500ms", "--slo-tpot", "30ms",
                 *SMALL, env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    launch = ("vllm serve", "python -m sglang", "trtllm-serve", "#")
    table = [line for line in out.stdout.splitlines() if not line.startswith(launch)]
    assert "cheapest meeting the SLOs" in out.stdout
    assert max(len(line) for line in table) <= 80
    assert "…" not in out.stdout  # nothing cut to make it fit


@pytest.mark.parametrize(("args", "bound"), [
    (("--slo-ttft", "1ms", "--slo-tpot", "1s"), "TTFT binds"),
    (("--slo-ttft", "30s", "--slo-tpot", "1ms"), "TPOT binds"),
])
def test_infeasible_slo_names_what_binds(workload_file, args, bound) -> None:
    out = search(workload_file, "--rate", 6, *args, *SMALL)
    assert out.exit_code == 1, out.output
    assert bound in out.stderr and out.stderr.count("\n") == 1


def test_infeasible_memory_names_memory(workload_file) -> None:
    out = CliRunner().invoke(app, ["search", "llama-3.1-70b-instruct", "--workload",
                                   str(workload_file), "--rate", "1", "--slo-ttft", "1s",
                                   "--devices", "l4-24gb", "--tp", "1", "--max-gpus", "1",
                                   "--workers", "1", "--json"])
    assert out.exit_code == 1, out.output
    assert "fits memory" in out.stderr
    assert json.loads(out.stdout)["binding_constraint"] == "memory"


@pytest.mark.parametrize(("args", "field"), [
    (("--devices", "h900"), "--devices"),
    (("--devices", "a100"), "a100-40gb or a100-80gb"),
    (("--devices", "a10g"), "no bandwidth or FLOPS"),
    (("--tp", "0"), "--tp"),
    (("--gpu-price", "l4=abc"), "--gpu-price"),
    (("--gpu-price", "h200=3"), "--gpu-price"),
    (("--disaggregate", "1-1"), "--disaggregate"),
    (("--weight-dtype", "fp7"), "--weight-dtype"),
    (("--rate", "0"), "--rate"),
    (("--max-model-len", "10"), "--max-model-len"),
    (("--slo-ttft", "500"), "--slo-ttft"),
    (("--workers", "0"), "--workers"),
    (("--policy", "fifo"), "policy"),
    (("--policy", "static"), "--disaggregate none"),
    (("--router", "random"), "--router"),
    (("--max-gpus", "0"), "--max-gpus"),
])
def test_bad_flags_are_one_line_exit_2(workload_file, args, field) -> None:
    base = {"--devices": "l4-24gb", "--rate": "6", "--slo-ttft": "1s", "--workers": "1"}
    flags = dict(base)
    flags.update(dict(zip(args[::2], args[1::2], strict=True)))
    out = search(workload_file, *[x for kv in flags.items() for x in kv])
    assert out.exit_code == 2, out.output
    assert field in out.stderr and out.stderr.count("\n") == 1
    assert "Traceback" not in out.output


def test_no_slo_is_refused(workload_file) -> None:
    out = search(workload_file, "--rate", 6, "--devices", "l4-24gb")
    assert out.exit_code == 2 and "--slo-ttft/--slo-tpot" in out.stderr


def test_xlsx_frontier_chart_is_bound_to_cells(workload_file, tmp_path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    path = tmp_path / "search.xlsx"
    out = search(workload_file, "--rate", 6, "--slo-ttft", "500ms", "--slo-tpot", "30ms",
                 *SMALL, "--json", "--xlsx", path)
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    book = openpyxl.load_workbook(path)
    front = book["Frontier"]
    (chart,) = front._charts
    refs = [str(s.xVal.numRef.f) for s in chart.series] + \
        [str(s.yVal.numRef.f) for s in chart.series]
    assert all(r.startswith("'Frontier'!") or r.startswith("Frontier!") for r in refs)
    values = [row[1:3] for row in front.iter_rows(min_row=2, values_only=True) if row[0]]
    assert len(values) == len(report["frontier"])
    assert values[0][0] == pytest.approx(report["frontier"][0]["tokens_per_s_per_gpu"])
    ranked = book["Search"]
    assert ranked.max_row >= len(report["candidates"]) + 1


def test_xlsx_cost_formula_recalculates_in_libreoffice(workload_file, tmp_path) -> None:
    """A real LibreOffice recomputes USD per hour = GPUs x price per GPU-hour for every row."""
    import shutil
    import subprocess

    openpyxl = pytest.importorskip("openpyxl")
    binary = shutil.which("soffice") or shutil.which("libreoffice")
    if binary is None:
        pytest.skip("LibreOffice (soffice) is not installed")
    path, outdir = tmp_path / "search.xlsx", tmp_path / "out"
    out = search(workload_file, "--rate", 6, "--slo-ttft", "500ms", "--slo-tpot", "30ms",
                 *SMALL, "--json", "--xlsx", path)
    assert out.exit_code == 0, out.output
    profile = tmp_path / "profile"
    subprocess.run([binary, f"-env:UserInstallation=file://{profile}", "--headless",
                    "--norestore", "--convert-to", "xlsx", "--outdir", str(outdir), str(path)],
                   check=True, capture_output=True, timeout=300)
    sheet = openpyxl.load_workbook(outdir / "search.xlsx", data_only=True)["Search"]
    heads = [c.value for c in sheet[1]]
    col = heads.index("USD per hour")
    costs = [row[col] for row in sheet.iter_rows(min_row=2, values_only=True)]
    expected = [r["cost_usd_per_hour"] for r in json.loads(out.stdout)["candidates"]]
    assert costs == pytest.approx(expected)


def test_plan_and_simulate_spelling_of_tp_and_pp_is_accepted(workload_file) -> None:
    """`-tp 2` (plan's, simulate's flag) once failed with 'No such option: -t'."""
    out = search(workload_file, "--rate", 1, "--slo-ttft", "1s", "--devices", "h100-80gb",
                 "-tp", 2, "-pp", 1, "--max-gpus", 2, "--num-requests", 50, "--workers", 1,
                 "--no-capacity", "--json")
    assert out.exit_code == 0, out.output
    assert {c["tensor_parallel_size"] for c in json.loads(out.stdout)["candidates"]} == {2}


ONE = ("--devices", "h100-80gb", "--tp", "1", "--max-gpus", "1", "--max-num-seqs", "64",
       "--max-num-batched-tokens", "2048", "--disaggregate", "none", "--workers", "1",
       "--no-capacity", "--rate", 2, "--slo-ttft", "2s", "--slo-itl", "100ms")


def test_the_default_engine_is_the_newest_release_and_is_named(report) -> None:
    from servecap.ledger.vllm_versions import NEWEST

    engine = report["engine"]
    assert engine["simulated"] == NEWEST.pin and engine["default"] and engine["given"] is None
    assert engine["memory_rules"] == NEWEST.pin
    assert any(n.startswith(f"engine {NEWEST.pin}: host") for n in report["time_model_notes"])


def test_engine_pin_plans_prices_and_labels_the_launch_line(workload_file) -> None:
    """A V0 pin: its default gpu_memory_utilization (0.90) in the launch line, its host terms
    in the notes and the vLLM heading naming it; plain: no release's terms, slower to none."""
    runs = {}
    for engine in ("vllm==0.6.3", "plain"):
        out = search(workload_file, *ONE, "--engine", engine, "--json")
        assert out.exit_code == 0, out.output
        runs[engine] = json.loads(out.stdout)
    v0, plain = runs["vllm==0.6.3"], runs["plain"]
    assert v0["engine"]["simulated"] == "vllm==0.6.3" and not v0["engine"]["default"]
    assert "--gpu-memory-utilization 0.90" in v0["launch"]["vllm"][0]
    assert any(n.startswith("engine vllm==0.6.3: host") for n in v0["time_model_notes"])
    assert plain["engine"]["simulated"] == "plain"
    assert any(n.startswith("engine: plain") for n in plain["time_model_notes"])
    assert v0["cheapest"]["ttft_ms"]["p50"] > plain["cheapest"]["ttft_ms"]["p50"]
    text = search(workload_file, *ONE, "--engine", "vllm==0.6.3")
    assert "vllm (as simulated: vllm==0.6.3):" in text.output


def test_engine_is_refused_by_name(workload_file) -> None:
    out = search(workload_file, *ONE, "--engine", "tgi")
    assert out.exit_code == 2 and "--engine = 'tgi': allowed: vllm" in out.output


def test_the_price_line_names_its_source_without_nested_parentheses(workload_file) -> None:
    """'$3/GPU-hour (servecap default table (round 2025 ...; pass --gpu-price))' nested one
    parenthesis in another; the source follows a semicolon instead."""
    text = search(workload_file, *ONE)
    assert text.exit_code == 0, text.output
    (line,) = [x for x in text.stdout.splitlines() if x.startswith("price h100-80gb: ")]
    assert line.startswith("price h100-80gb: $3/GPU-hour; servecap default table (")
    assert "((" not in line and "))" not in line
