"""vLLM's own spellings on every command that plans: --kv-cache-dtype for --kv-dtype and
--tp/--pp beside -tp/-pp print what the servecap spellings print; --help shows the option
groups as panels."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

runner = CliRunner()
MODEL = ["llama-3.1-70b-instruct", "--device", "h100-80gb", "--context", "8192"]
SIM = ["llama-3.1-8b", "--device", "h100-80gb", "--input-len", "256", "--output-len", "16",
       "--num-requests", "40", "--rate", "2"]


def out(*args):
    result = runner.invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("ours", "theirs"), [
    (["-tp", "4", "-pp", "2"], ["--tp", "4", "--pp", "2"]),
    (["--kv-dtype", "fp8"], ["--kv-cache-dtype", "fp8"]),
])
def test_plan_reads_vllms_spelling_as_its_own(ours, theirs):
    assert out("plan", *MODEL, *theirs, "--json") == out("plan", *MODEL, *ours, "--json")


@pytest.mark.parametrize("command", ["plan", "fit", "workbook", "reconcile", "verify"])
def test_every_planning_command_offers_tp_and_kv_cache_dtype(command):
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--tp" in result.stdout and "--kv-cache-dtype" in result.stdout
    assert "--max-model-len" in result.stdout


def test_workbook_reads_max_model_len_as_context(tmp_path):
    args = ["workbook", "llama-3.1-8b", "--device", "40GiB"]
    for flag, name in (("--context", "a"), ("--max-model-len", "b")):
        result = runner.invoke(app, [*args, flag, "4096", "-o", str(tmp_path / f"{name}.xlsx")])
        assert result.exit_code == 0, result.output
    from openpyxl import load_workbook

    def context(name: str) -> int:
        book = load_workbook(tmp_path / f"{name}.xlsx")
        sheet, ref = next(iter(book.defined_names["context_tokens"].destinations))
        return book[sheet][ref.replace("$", "")].value

    assert context("a") == context("b") == 4096


def test_simulate_reads_vllms_spelling_as_its_own():
    ours = out("simulate", *SIM, "--kv-dtype", "fp8", "-tp", "2", "--json")
    theirs = out("simulate", *SIM, "--kv-cache-dtype", "fp8", "--tp", "2", "--json")
    assert theirs == ours


def test_simulate_reads_vllm_bench_serves_num_prompts():
    """simulate's help says --num-requests is `vllm bench serve --num-prompts`: that spelling
    is taken too, as --request-rate is beside --rate."""
    ours = out("simulate", *SIM, "--json")
    theirs = out("simulate", *[("--num-prompts" if a == "--num-requests" else a) for a in SIM],
                 "--json")
    assert theirs == ours and theirs["policies"][0]["offered"] == 40


@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_help_groups_the_options_in_panels(command):
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "120"}).stdout
    for panel in ("Model and device", "Deployment", "Engine (vLLM's knobs)", "Workload",
                  "SLOs", "Step model", "Output", "Scenario"):
        assert panel in text, panel


@pytest.mark.parametrize(("command", "panels"), [
    ("cost", ("Prices", "Measured throughput", "Workload", "SLOs")),
    ("speculate", ("Speculative decoding", "Compared"))])
def test_cost_and_speculate_show_their_groups_as_panels(command, panels):
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "120"}).stdout
    for panel in (*panels, "Model and device", "Deployment", "Step model", "Output",
                  "Scenario"):
        assert panel in text, panel


def test_the_big_commands_take_their_options_as_groups():
    import inspect

    from servecap.cli.cost_cmd import cost
    from servecap.cli.fit_cmd import fit
    from servecap.cli.load_cmd import load
    from servecap.cli.plan_cmd import plan
    from servecap.cli.reconcile_cmd import reconcile_cmd
    from servecap.cli.search_cmd import search
    from servecap.cli.serve_cmd import serve
    from servecap.cli.simulate_cmd import simulate
    from servecap.cli.speculate_cmd import speculate
    from servecap.cli.sweep_cmd import sweep
    from servecap.cli.verify_cmd import verify
    from servecap.cli.workbook_cmd import workbook

    for command, offered in ((simulate, 40), (sweep, 40), (plan, 35), (verify, 30),
                              (search, 30), (cost, 25), (speculate, 15), (load, 40),
                              (serve, 24), (fit, 30), (workbook, 25),
                              (reconcile_cmd, 25)):
        written = command
        while hasattr(written, "command"):  # each group's expansion, down to the function
            written = written.command
        assert len(inspect.signature(written).parameters) <= 15
        assert len(inspect.signature(command).parameters) > offered  # every option offered


def test_plan_takes_enforce_eager_as_the_launch_line_does():
    """plan's does-not-start advice names vLLM's --enforce-eager; plan takes it too, and
    plans what `-- vllm serve ... --enforce-eager` plans: no CUDA-graph pool, a larger KV
    pool than with graphs."""
    device = ["--device", "h100-80gb"]
    flag = out("plan", "llama-3.1-8b", *device, "--engine", "vllm", "--enforce-eager", "--json")
    line = out("plan", *device, "--json", "--", "vllm", "serve", "llama-3.1-8b",
               "--enforce-eager")
    graphs = out("plan", "llama-3.1-8b", *device, "--engine", "vllm", "--json")
    assert flag == line
    assert flag["kv_pool_bytes"] > graphs["kv_pool_bytes"]


@pytest.mark.parametrize("command", ["plan", "fit", "workbook"])
def test_every_planning_command_offers_enforce_eager(command):
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
    assert "--enforce-eager" in text
