"""--scenario and --save-scenario through the real CLI: a saved scenario runs the same
command again to the byte, flags beside a file win (and -v says so), bad files are one line."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.inputs import PLAN_PATHS
from servecap.cli.plan_cmd import plan
from servecap.cli.scenario_opts import unmapped
from servecap.cli.sim_inputs import SIM_PATHS
from servecap.cli.simulate_cmd import simulate
from servecap.scenario.spec import paths

runner = CliRunner()
SIM = ["llama-3.1-8b", "--device", "h100-80gb", "--input-len", "512", "--output-len", "64",
       "--rate", "4", "--num-requests", "120", "--slo-ttft", "500ms", "--percentiles", "50,99"]
PLANS = [
    ["llama-3.1-8b", "--device", "h100-80gb", "--context", "8192", "--concurrency", "4"],
    ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4", "--engine", "vllm==0.11",
     "--gpu-memory-utilization", "0.85", "--max-num-seqs", "64"],
    ["teaching-7b", "--lengths", "17,33,65", "--kv-dtype", "fp8", "--safety", "10%"],
    ["llama-3.1-8b", "--device", "40GiB", "--engine", "sglang", "--mem-fraction-static", "0.8"],
]


def invoke(*args):
    result = runner.invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output
    return result


@pytest.mark.parametrize("args", PLANS, ids=lambda a: a[0] + "-" + "-".join(a[1:3]))
def test_plan_saved_then_run_from_the_file_prints_the_same_json(args, tmp_path):
    saved = tmp_path / "s.yaml"
    first = invoke("plan", *args, "--json", "--save-scenario", str(saved))
    again = invoke("plan", "--scenario", str(saved), "--json")
    assert again.stdout == first.stdout
    assert json.loads(first.stdout)["device_bytes"] > 0


def test_simulate_saved_then_run_from_the_file_prints_the_same_json(tmp_path):
    saved = tmp_path / "s.yaml"
    first = invoke("simulate", *SIM, "--policy", "static", "--policy", "continuous", "--json",
                   "--save-scenario", str(saved))
    again = invoke("simulate", "--scenario", str(saved), "--json")
    assert again.stdout == first.stdout
    assert [p["policy"] for p in json.loads(again.stdout)["policies"]] == ["static",
                                                                          "continuous"]


def test_a_flag_beside_the_file_wins_and_verbose_names_both_values(tmp_path):
    saved = tmp_path / "s.yaml"
    invoke("plan", *PLANS[0], "--json", "--save-scenario", str(saved))
    result = invoke("plan", "--scenario", str(saved), "--context", "4096", "--json", "-v")
    assert json.loads(result.stdout)["context_tokens"] == 4096
    assert "scheduler.max_model_len: --context 4096 (command line) over" in result.stderr
    assert "'s 8192" in result.stderr
    direct = invoke("plan", "llama-3.1-8b", "--device", "h100-80gb", "--context", "4096",
                    "--concurrency", "4", "--json")
    assert json.loads(direct.stdout) == json.loads(result.stdout)


def test_a_simulate_scenario_plans_the_same_device_and_model(tmp_path):
    saved = tmp_path / "s.yaml"
    invoke("simulate", *SIM, "--json", "--save-scenario", str(saved))
    planned = invoke("plan", "--scenario", str(saved), "--json").stdout
    assert planned == invoke("plan", "llama-3.1-8b", "--device", "h100-80gb", "--json").stdout


@pytest.mark.parametrize(("text", "needles"), [
    ("scheduler:\n  max_model_len: lots\n", ("scheduler.max_model_len = 'lots'", "integer")),
    ("schedule: {}\n", ("schedule = {}", "unknown key", "scheduler")),
    ("scheduler:\n  bogus: 1\n", ("scheduler.bogus = 1", "max_model_len")),
    ("memory:\n  gpu_memory_utilization: 1.5\n", ("memory.gpu_memory_utilization = 1.5",
                                                  "less than or equal to 1")),
    ("- 1\n", ("document = 'list'", "mapping")),
    ("parallel:\n  tensor_parallel_size: true\n", ("parallel.tensor_parallel_size = True",)),
])
def test_a_bad_scenario_file_is_one_line_naming_file_field_and_value(text, needles, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    for command in ("plan", "simulate"):
        result = runner.invoke(app, [command, "--scenario", str(bad)])
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert "\n" not in line and "Traceback" not in line
        assert str(bad) in line
        for needle in needles:
            assert needle in line


@pytest.mark.parametrize(("command", "mapping"), [(plan, PLAN_PATHS), (simulate, SIM_PATHS)])
def test_every_flag_describes_the_scenario_or_shapes_the_output(command, mapping):
    outputs = {"ctx", "as_json", "xlsx", "force", "from_workbook", "verbose", "scenario_file",
               "save_scenario", "records_path", "token_times_path", "vllm_line"}
    assert unmapped(command, mapping, outputs) == set()
    known = set(paths())
    assert {p for targets in mapping.values() for p in targets} <= known
