"""The command group loads one command's module to run it, lists them all without importing
any, and turns every usage error into one line."""

import json
import subprocess
import sys

import pytest

from servecap.cli.app import COMMANDS, load_command

MODULES = """
import io, sys, json, contextlib
sys.argv = ["servecap", *json.loads(sys.argv[1])]
from servecap.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps([code, sorted(m for m in sys.modules if m.startswith(("servecap.", "rich")))]))
"""


def _loaded(*args: str) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", MODULES, json.dumps(args)], capture_output=True,
                         text=True, check=True)
    code, modules = json.loads(out.stdout.strip().splitlines()[-1])
    return code, set(modules)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_the_commands_own_first_paragraph(name) -> None:
    first = load_command(name).help.strip().split("\n\n")[0]
    assert COMMANDS[name][1] == " ".join(first.split())


def test_help_imports_no_command_module() -> None:
    code, modules = _loaded("--help")
    assert code == 0
    assert not {m for m in modules if m.endswith("_cmd") or ".sim." in m or ".runtime." in m}
    assert "servecap.model_configs.schema" not in modules


def test_plan_imports_only_its_own_command() -> None:
    code, modules = _loaded("plan", "teaching-7b", "--json")
    assert code == 0
    assert {m for m in modules if m.endswith("_cmd")} == {"servecap.cli.plan_cmd"}
    assert not {m for m in modules if m.startswith(("servecap.sim", "servecap.runtime",
                                                    "servecap.workbooks"))}
    # a bundled model YAML reads no config.json (its field filter, encoder and vision towers,
    # quantization file) and has no safetensors headers to price weights from
    assert not {"servecap.model_configs.config_read", "servecap.model_configs.encoders",
                "servecap.model_configs.vision_fields", "servecap.model_configs.quant_files",
                "servecap.model_configs.checkpoint_weights"} & modules
    # an unquantized checkpoint needs no per-generation residency or quant-kernel tables
    assert not {"servecap.ledger.residency", "servecap.ledger.quant_kernels"} & modules
    # a model vLLM supports, without a quantization_config, needs neither vLLM's class registry
    # nor a quantization format's reader
    assert not {"servecap.model_configs.vllm_classes", "servecap.model_configs.vllm_registry",
                "servecap.model_configs.modelopt", "servecap.model_configs.int_formats",
                "servecap.model_configs.compressed_tensors"} & modules
    # the default engine plans no vLLM pool rules, runner or after-pool check
    assert not {"servecap.ledger.vllm_after", "servecap.ledger.vllm_lines",
                "servecap.ledger.vllm_runner"} & modules
    # a text model needs no vision family's encoder token rules
    assert "servecap.ledger.encoder_rules" not in modules


def test_simulate_json_imports_no_other_command_and_no_rendering() -> None:
    """simulate --json prints JSON: none of sweep's, cost's or speculate's modules, no rich
    table or console, no workbook code."""
    code, modules = _loaded("simulate", "teaching-7b", "--device", "h100-80gb",
                            "--input-len", "64", "--output-len", "8", "--num-requests", "20",
                            "--json")
    assert code == 0
    assert {m for m in modules if m.endswith("_cmd")} == {"servecap.cli.simulate_cmd"}
    assert not {m for m in modules if m.startswith(("rich", "servecap.workbooks",
                                                    "servecap.runtime"))}
    assert not {"servecap.cli.sim_view", "servecap.cli.sim_xlsx"} & modules
    # a fixed shape or a workload YAML replays no token-id trace, a deployment that starts needs
    # no start advice's search, a model without an indexer no cache page specs: each module's
    # dataclasses are built only where it is used
    assert not {"servecap.scenario.prefix_trace", "servecap.ledger.prefix_cache",
                "servecap.ledger.fit", "servecap.ledger.cache_specs"} & modules


@pytest.mark.parametrize(("args", "needle"), [
    (("plan", "teaching-7b", "--context", "4k"), "did you mean 4096 or 4000?"),
    (("plan", "teaching-7b", "--context=32K"), "did you mean 32768 or 32000?"),
    (("plan", "teaching-7b", "--context", "9" * 5000), "--context"),
    (("plan", "teaching-7b", "--concurrency", "x"), "--concurrency"),
    (("plan", "teaching-7b", "--bogus"), "No such option: --bogus"),
    (("plan", "teaching-7b", "--block-size", "1.5"), "--block-size"),
    (("plan", "teaching-7b", "--device"), "--device"),
    (("plna",), "No such command"),
    (("simulate", "teaching-7b", "--replicas", "two"), "--replicas"),
    (("sweep", "teaching-7b", "--num-rates", "many"), "--num-rates"),
    (("verify", "teaching-7b", "--tensor-parallel-size", "x"), "--tensor-parallel-size"),
    (("blocks", "lots"), "lengths"),
])
def test_usage_errors_are_one_line(run, args, needle) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servecap: error:"), result.stderr
    assert needle in lines[0] and "--help" in lines[0] and len(lines[0]) < 420


@pytest.mark.parametrize("args", [("devices", "--json"), ("blocks", "17", "33", "--json")])
def test_catalog_commands_build_no_model_schema(args) -> None:
    code, modules = _loaded(*args)
    assert code == 0
    assert "servecap.model_configs.schema" not in modules


COLLECTOR = """
import gc, io, json, sys, contextlib
seen = {}
def hook(event, args):
    if event == "open" and "plan_cmd" in str(args[0]):  # its source or bytecode
        seen.setdefault("importing the command", gc.isenabled())
    if event == "open" and str(args[0]).endswith("teaching-7b.yaml"):
        seen.setdefault("the command reading its model", gc.isenabled())
sys.addaudithook(hook)
sys.argv = ["servecap", *json.loads(sys.argv[1])]
from servecap.cli.app import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        seen["exit"] = exc.code
seen["after"] = gc.isenabled()
seen["frozen at exit"] = gc.get_freeze_count() > 0
print(json.dumps(seen))
"""


@pytest.mark.parametrize(("args", "expected"), [
    (("plan", "teaching-7b", "--json"),
     {"importing the command": False, "the command reading its model": True, "exit": 0}),
    (("plan", "teaching-7b", "--context", "4k"), {"importing the command": False, "exit": 2}),
])
def test_the_collector_is_paused_over_start_up_alone(args, expected) -> None:
    """cli/startup_gc.py: off while the command's modules import and its options parse, on
    when the command's own code runs, and on after a refused command line; what is left
    when main() returns is frozen, so the interpreter's exit does not walk it again."""
    out = subprocess.run([sys.executable, "-c", COLLECTOR, json.dumps(args)],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {**expected, "after": True, "frozen at exit": True}
