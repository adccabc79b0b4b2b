"""--scenario and --save-scenario through the real CLI: a saved scenario runs the same
command again to the byte, flags beside a file win (and -v says so), bad files are one line."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.cost_cmd import COST_PATHS, cost
from servecap.cli.fit_cmd import FIT_PATHS, fit
from servecap.cli.inputs import PLAN_PATHS
from servecap.cli.load_cmd import load
from servecap.cli.load_inputs import LOAD_PATHS
from servecap.cli.plan_cmd import plan
from servecap.cli.reconcile_cmd import RECONCILE_PATHS, reconcile_cmd
from servecap.cli.scenario_opts import unmapped
from servecap.cli.search_cmd import SEARCH_PATHS, search
from servecap.cli.serve_cmd import SERVE_PATHS, serve
from servecap.cli.sim_inputs import SIM_PATHS
from servecap.cli.simulate_cmd import simulate
from servecap.cli.speculate_cmd import SPECULATE_PATHS, speculate
from servecap.cli.sweep_cmd import SWEEP_PATHS, sweep
from servecap.cli.verify_cmd import VERIFY_PATHS, verify
from servecap.cli.workbook_cmd import WORKBOOK_PATHS, workbook
from servecap.ledger.vllm_versions import NEWEST
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


def test_a_simulated_engine_release_round_trips_through_the_file(tmp_path):
    """--engine and the release's scheduling knobs are scenario fields: saved, they run the
    same V0 multi-step simulation again, its scheduler (prefill-priority) included."""
    saved = tmp_path / "s.yaml"
    first = invoke("simulate", *SIM, "--engine", "vllm==0.6.3", "--num-scheduler-steps", "8",
                   "--json", "--save-scenario", str(saved))
    text = saved.read_text()
    assert "engine: vllm==0.6.3" in text and "num_scheduler_steps: 8" in text
    again = invoke("simulate", "--scenario", str(saved), "--json")
    assert again.stdout == first.stdout
    report = json.loads(again.stdout)
    assert [p["policy"] for p in report["policies"]] == ["prefill-priority"]
    default = json.loads(invoke("simulate", *SIM, "--json").stdout)
    assert report["policies"][0]["ttft_ms"]["p50"] != default["policies"][0]["ttft_ms"]["p50"]


def test_a_knob_the_release_lacks_is_refused_by_name(tmp_path):
    """Multi-step scheduling is V0's: the default release (V1) refuses it, naming itself as
    the default; plain has no release for it to belong to."""
    result = runner.invoke(app, ["simulate", *SIM, "--num-scheduler-steps", "8"])
    assert result.exit_code == 2 and "--num-scheduler-steps" in result.stderr
    assert f"{NEWEST.pin} (the default) is V1" in result.stderr
    result = runner.invoke(app, ["simulate", *SIM, "--engine", "plain",
                                 "--num-scheduler-steps", "8"])
    assert result.exit_code == 2 and "needs a vLLM release" in result.stderr


def test_the_default_engine_is_spelled_out_in_the_saved_scenario(tmp_path):
    """A null simulator.engine says which release it stood for; run again it is the same
    release; --engine plain is saved as a value and runs plain again."""
    saved, plain = tmp_path / "s.yaml", tmp_path / "p.yaml"
    first = json.loads(invoke("simulate", *SIM, "--json", "--save-scenario", str(saved)).stdout)
    line = next(x for x in saved.read_text().splitlines() if x.strip().startswith("engine: n"))
    assert line.startswith(f"  engine: null  # in effect: {NEWEST.pin} (default: the newest")
    assert first["engine"]["simulated"] == NEWEST.pin and first["engine"]["default"]
    invoke("simulate", *SIM, "--engine", "plain", "--json", "--save-scenario", str(plain))
    assert "  engine: plain\n" in plain.read_text()
    again = json.loads(invoke("simulate", "--scenario", str(plain), "--json").stdout)
    assert again["engine"]["simulated"] == "plain" and again["coefficients"]["cpu_step_s"] == 0


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
    ("- 1\n", ("document = a list", "mapping")),
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


@pytest.mark.parametrize(("command", "mapping"), [(plan, PLAN_PATHS), (simulate, SIM_PATHS),
                                                  (sweep, SWEEP_PATHS),
                                                  (verify, VERIFY_PATHS),
                                                  (search, SEARCH_PATHS),
                                                  (fit, FIT_PATHS), (cost, COST_PATHS),
                                                  (speculate, SPECULATE_PATHS),
                                                  (workbook, WORKBOOK_PATHS),
                                                  (reconcile_cmd, RECONCILE_PATHS),
                                                  (load, LOAD_PATHS), (serve, SERVE_PATHS)])
def test_every_flag_describes_the_scenario_or_shapes_the_output(command, mapping):
    outputs = {"ctx", "as_json", "xlsx", "force", "from_workbook", "verbose", "scenario_file",
               "save_scenario", "records_path", "token_times_path", "launch",
               "calibration_out", "inject_oom", "workers", "ray", "top", "find", "up_to",
               "hit_rate", "tokens_per_s", "input_tokens_per_s", "batches",
               "output", "log", "rate_trace",  # the question, not the scenario
               "base_url", "metrics", "nvml", "compare_simulate",  # load: the run's server
               "host", "port", "api_key"}  # serve: the run's address and its secret
    assert unmapped(command, mapping, outputs) == set()
    known = set(paths())
    assert {p for targets in mapping.values() for p in targets} <= known


WORKLOAD = {"seed": 5, "num_requests": 60, "arrivals": {"kind": "poisson", "rate_per_s": 1},
            "prompt_tokens": {"kind": "uniform", "low": 500, "high": 1500},
            "output_tokens": {"kind": "uniform", "low": 50, "high": 150}}


def test_a_workload_path_is_kept_relative_to_the_scenario_file(tmp_path, monkeypatch):
    import yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "loads").mkdir()
    (tmp_path / "loads" / "w.yaml").write_text(yaml.safe_dump(WORKLOAD))
    (tmp_path / "conf").mkdir()
    first = invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload",
                   "loads/w.yaml", "--json", "--save-scenario", "conf/s.yaml")
    assert yaml.safe_load((tmp_path / "conf" / "s.yaml").read_text())["workload"]["file"] \
        == "../loads/w.yaml"
    assert invoke("simulate", "--scenario", "conf/s.yaml", "--json").stdout == first.stdout
    monkeypatch.chdir(tmp_path / "conf")  # the file still finds its workload from elsewhere
    moved = json.loads(invoke("simulate", "--scenario", "s.yaml", "--json").stdout)
    assert moved["policies"][0]["completed"] == json.loads(first.stdout)["policies"][0][
        "completed"]


def test_sweep_saved_then_run_from_the_file_prints_the_same_json(tmp_path):
    import yaml

    workload, saved = tmp_path / "w.yaml", tmp_path / "s.yaml"
    workload.write_text(yaml.safe_dump(WORKLOAD))
    first = invoke("sweep", "llama-3.1-8b", "--device", "h100-80gb", "--workload",
                   str(workload), "--rates", "1,4", "--slo-ttft", "500ms", "--target", "0.8",
                   "--json", "--save-scenario", str(saved))
    again = invoke("sweep", "--scenario", str(saved), "--json")
    assert again.stdout == first.stdout
    assert [p["rate_per_s"] for p in json.loads(again.stdout)["points"]] == [1.0, 4.0]
    faster = json.loads(invoke("sweep", "--scenario", str(saved), "--rates", "2",
                               "--json").stdout)
    assert [p["rate_per_s"] for p in faster["points"]] == [2.0]


def test_verify_saved_then_run_from_the_file_plans_and_runs_the_same(tmp_path):
    pytest.importorskip("torch")
    saved = tmp_path / "v.yaml"
    args = ["tiny-llama", "--device", "cpu", "--device-memory", "16MiB", "--context", "64",
            "--concurrency", "3", "--output-tokens", "8", "--no-probe"]
    first = json.loads(invoke("verify", *args, "--json", "--save-scenario", str(saved)).stdout)
    again = json.loads(invoke("verify", "--scenario", str(saved), "--json").stdout)

    def planned(report):  # what the scenario decides; the rest is measured on this run
        return ([(line["line"], line["predicted_bytes"]) for line in report["lines"]],
                report["predicted_ceiling_requests"], report["device_bytes"],
                report["model"], report["tensor_parallel_size"])
    assert planned(again) == planned(first)
    assert again["ceiling_probe"] == first["ceiling_probe"]
    wider = json.loads(invoke("verify", "--scenario", str(saved), "--concurrency", "2",
                              "--json").stdout)
    assert wider["predicted_ceiling_requests"] == first["predicted_ceiling_requests"]
    assert planned(wider) != planned(first)  # the KV line holds two requests, not three


def test_search_saved_then_run_from_the_file_gives_the_same_report(tmp_path):
    import yaml

    workload, saved = tmp_path / "w.yaml", tmp_path / "s.yaml"
    workload.write_text(yaml.safe_dump(WORKLOAD))
    args = ["llama-3.1-8b", "--workload", str(workload), "--rate", "6", "--slo-ttft", "500ms",
            "--slo-itl", "30ms", "--devices", "l4-24gb,a100-80gb", "--tp", "1,2",
            "--max-gpus", "4", "--max-num-seqs", "64", "--max-num-batched-tokens", "2048",
            "--disaggregate", "1:1", "--no-capacity"]
    first = json.loads(invoke("search", *args, "--workers", "1", "--json",
                              "--save-scenario", str(saved)).stdout)
    again = json.loads(invoke("search", "--scenario", str(saved), "--workers", "1",
                              "--json").stdout)
    for report in (first, again):  # wall and CPU time: the figures measured on each run
        report.pop("elapsed_s"), report["space"].pop("worker_cpu_s")
    assert again == first
    assert first["cheapest"]["max_num_seqs"] == 64
    missing = runner.invoke(app, ["search", "llama-3.1-8b", "--rate", "6"])
    assert missing.exit_code == 2 and "--workload is missing" in missing.stderr


def test_fit_saved_then_run_from_the_file_gives_the_same_answer(tmp_path):
    saved = tmp_path / "f.yaml"
    args = ["llama-3.1-8b", "--device", "40GiB", "--context", "32768"]
    first = invoke("fit", *args, "--json", "--save-scenario", str(saved))
    assert invoke("fit", "--scenario", str(saved), "--json").stdout == first.stdout
    shorter = json.loads(invoke("fit", "--scenario", str(saved), "--context", "8192",
                                "--json").stdout)
    assert shorter["max_concurrency_requests"] > json.loads(first.stdout)[
        "max_concurrency_requests"]


def test_cost_saved_then_run_from_the_file_prices_the_same(tmp_path):
    saved = tmp_path / "c.yaml"
    args = ["llama-3.1-8b", "--device", "h100-80gb", "--input-len", "512", "--output-len",
            "64", "--num-requests", "120", "--gpu-price", "3", "--api-price", "0.5"]
    first = invoke("cost", *args, "--json", "--save-scenario", str(saved))
    assert invoke("cost", "--scenario", str(saved), "--json").stdout == first.stdout
    half = json.loads(invoke("cost", "--scenario", str(saved), "--utilization", "0.5",
                             "--json").stdout)
    full = json.loads(first.stdout)
    assert half["gpu_price_per_h"] == 3.0 and half["utilization"] == 0.5
    assert half["usd_per_million_at_utilization"] == pytest.approx(
        2 * full["usd_per_million_at_utilization"])


def test_speculate_saved_then_run_from_the_file_compares_the_same(tmp_path):
    saved = tmp_path / "sp.yaml"
    args = ["llama-3.1-8b", "--device", "h100-80gb", "--draft", "llama-3.2-1b-instruct",
            "--batches", "1,8,64"]
    first = invoke("speculate", *args, "--json", "--save-scenario", str(saved))
    again = invoke("speculate", "--scenario", str(saved), "--batches", "1,8,64", "--json")
    assert again.stdout == first.stdout
    longer = json.loads(invoke("speculate", "--scenario", str(saved), "--acceptance", "0.9",
                               "--batches", "1,8,64", "--json").stdout)
    assert longer["expected_tokens_per_step"] > json.loads(first.stdout)[
        "expected_tokens_per_step"]


def test_a_saved_scenario_says_what_each_null_field_took(tmp_path):
    import yaml

    saved = tmp_path / "s.yaml"
    invoke("plan", "llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4", "--engine",
           "vllm", "--json", "--save-scenario", str(saved))
    text = saved.read_text()
    assert "max_model_len: null  # in effect: 131072" in text  # the model's context
    assert "gpu_memory_utilization: null  # in effect: 0.92" in text  # the release's
    assert "max_num_seqs: null  #" not in text  # vLLM's release picks it, not the plan
    assert yaml.safe_load(text)["scheduler"]["max_model_len"] is None  # still derived again


def _cells(path) -> dict:
    """Every sheet's cell values (formulas as their text), by sheet name."""
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.load_workbook(path)
    return {name: [[c.value for c in row] for row in book[name].iter_rows()]
            for name in book.sheetnames}


def _sourced(path) -> tuple[dict, dict]:
    """The cells, less the Scenario sheet's source column (a flag, or the file that gave a
    field), and that column by field."""
    cells = _cells(path)
    return cells, {row[0]: row.pop(2) for row in cells["Scenario"]}


def test_workbook_saved_then_run_from_the_file_writes_the_same_cells(tmp_path):
    import yaml

    saved, first, again = tmp_path / "w.yaml", tmp_path / "a.xlsx", tmp_path / "b.xlsx"
    invoke("workbook", "llama-3.1-8b", "--device", "40GiB", "--device", "h100-80gb",
           "--context", "4096", "--context", "32768", "--kv-dtype", "fp8", "--concurrency",
           "8", "-tp", "2", "--engine", "vllm", "-o", str(first), "--save-scenario", str(saved))
    envelope = yaml.safe_load(saved.read_text())["envelope"]
    assert envelope == {"devices": ["40GiB", "h100-80gb"], "contexts": [4096, 32768],
                        "kv_dtypes": ["fp8"]}
    invoke("workbook", "--scenario", str(saved), "-o", str(again))
    (cells, sources), (cells_again, sources_again) = _sourced(first), _sourced(again)
    assert cells == cells_again  # the Scenario sheet's values too; its sources name the file
    assert {"Inputs", "Ledger", "Ranks", "Envelope"} <= set(cells)
    assert sources["device.name"] == "--device (command line)"
    assert sources_again["device.name"] == str(saved)
    assert set(sources) == set(sources_again)


def test_a_context_beside_a_workbook_scenario_is_the_ledgers_and_the_envelopes(tmp_path):
    import yaml

    saved, again = tmp_path / "w.yaml", tmp_path / "w2.yaml"
    invoke("workbook", "llama-3.1-8b", "--device", "40GiB", "--context", "4096", "--context",
           "32768", "-o", str(tmp_path / "a.xlsx"), "--save-scenario", str(saved))
    invoke("workbook", "--scenario", str(saved), "--context", "8192", "-o",
           str(tmp_path / "b.xlsx"), "--save-scenario", str(again))
    written = yaml.safe_load(again.read_text())
    assert written["scheduler"]["max_model_len"] == 8192
    assert written["envelope"]["contexts"] == [8192]
    assert written["envelope"]["devices"] == ["40GiB"]  # the file's, untouched


def test_a_plan_scenario_makes_the_workbook_plan_xlsx_writes(tmp_path):
    saved, planned, booked = tmp_path / "p.yaml", tmp_path / "p.xlsx", tmp_path / "w.xlsx"
    invoke("plan", "llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4", "--engine",
           "vllm", "--xlsx", str(planned), "--save-scenario", str(saved))
    invoke("workbook", "--scenario", str(saved), "-o", str(booked))
    assert _sourced(planned)[0] == _sourced(booked)[0]


def test_workbook_without_a_model_or_a_scenario_names_model(tmp_path):
    result = runner.invoke(app, ["workbook", "-o", str(tmp_path / "a.xlsx")])
    assert result.exit_code == 2
    assert "MODEL" in result.output and not (tmp_path / "a.xlsx").exists()


LOG = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs" / \
    "v1_qwen3_14b_a100_40gb.log"


def test_reconcile_saved_then_run_from_the_file_prints_the_same_json(tmp_path):
    import yaml

    saved, again = tmp_path / "r.yaml", tmp_path / "r2.yaml"
    first = invoke("reconcile", str(LOG), "--model", "qwen3-14b", "--device", "a100-40gb",
                   "--json", "--save-scenario", str(saved))
    assert invoke("reconcile", str(LOG), "--scenario", str(saved), "--json").stdout == \
        first.stdout
    assert json.loads(first.stdout)["rows"][0]["key"] == "kv_pool"
    invoke("reconcile", str(LOG), "--scenario", str(saved), "--max-model-len", "4096",
           "--json", "--save-scenario", str(again))
    written = yaml.safe_load(again.read_text())
    assert written["scheduler"]["max_model_len"] == 4096
    assert written["device"]["name"] == "a100-40gb"  # the file's, untouched


def test_a_plan_scenario_reconciles_as_the_same_flags_do(tmp_path):
    saved = tmp_path / "p.yaml"
    invoke("plan", "qwen3-14b", "--device", "a100-40gb", "--json", "--save-scenario", str(saved))
    flagged = invoke("reconcile", str(LOG), "--model", "qwen3-14b", "--device", "a100-40gb",
                     "--json")
    assert invoke("reconcile", str(LOG), "--scenario", str(saved), "--json").stdout == \
        flagged.stdout


def test_reconcile_without_a_model_or_a_scenario_names_model():
    result = runner.invoke(app, ["reconcile", str(LOG)])
    assert result.exit_code == 2
    assert "--model" in result.output and "Traceback" not in result.output
