"""Each scheduler default is defined once, in ledger/serve.py, and every user of it agrees."""

import inspect
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.inputs import PlanFlags
from servecap.cli.sim_inputs import SimFlags
from servecap.cli.simulate_cmd import simulate
from servecap.cli.sweep_cmd import sweep
from servecap.ledger import serve
from servecap.ledger.engines import DEFAULT_BLOCK_TOKENS, VLLM
from servecap.scenario import steps
from servecap.sim.config import SchedulerConfig

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {"max_num_seqs": serve.DEFAULT_MAX_NUM_SEQS,
            "max_num_batched_tokens": serve.DEFAULT_MAX_NUM_BATCHED_TOKENS,
            "watermark": serve.DEFAULT_WATERMARK}


def test_every_holder_of_a_scheduler_default_agrees_with_the_ledger():
    """The config and the plan hold the ledger's defaults; simulate and sweep leave the batch
    limits unset (None: the simulated release's own default for the device, else the
    ledger's) and hold the ledger's watermark."""
    cfg, flags, plan = SchedulerConfig(), SimFlags(), PlanFlags()
    for name, value in DEFAULTS.items():
        assert getattr(cfg, name) == value
        assert getattr(flags, name) == (value if name == "watermark" else None)
    assert cfg.block_size_tokens == flags.block_size == DEFAULT_BLOCK_TOKENS[VLLM] \
        == serve.DEFAULT_BLOCK_SIZE_TOKENS
    assert plan.max_num_seqs == serve.DEFAULT_MAX_NUM_SEQS
    for command in (simulate, sweep):
        params = inspect.signature(command).parameters
        for name, value in DEFAULTS.items():
            assert params[name].default == (value if name == "watermark" else None), \
                (command.__name__, name)


def test_no_second_literal_copy_in_cli_or_sim():
    """A default written out again as a number is a future disagreement."""
    pattern = re.compile(r"(max_num_seqs|max_num_batched_tokens|watermark|block_size\w*)"
                         r"\s*:[^=\n]*=\s*(256|8192|0\.01|16)\b")
    found = [f"{path.relative_to(ROOT)}: {m.group(0)}"
             for folder in ("cli", "sim") for path in (ROOT / folder).glob("*.py")
             for m in pattern.finditer(path.read_text())]
    assert found == []


@pytest.mark.parametrize("command", ["simulate", "sweep", "cost"])
def test_policy_help_states_the_default_the_runs_use(command):
    """Every --policy help gives the one sentence beside default_policy, and the runs bear
    it out: a default run chunks prefills (V1), --engine vllm==0.6.3 (V0) prefills whole
    prompts first, plain runs continuous."""
    shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    text = " ".join(shown.stdout.replace("│", " ").split())
    said = steps.policy_default_help("--speed-of-light") if command == "cost" \
        else steps.DEFAULT_POLICY_HELP  # cost takes no --coefficients
    assert " ".join(said.split()) in text
    assert "Default continuous" not in text


@pytest.mark.parametrize("extra, policy", [
    ((), steps.RELEASE_POLICIES["v1"]), (("--engine", "vllm==0.6.3"),
                                         steps.RELEASE_POLICIES["v0"]),
    (("--engine", "plain"), steps.PLAIN_POLICY), (("--speed-of-light",), steps.PLAIN_POLICY)])
def test_a_run_without_policy_runs_the_release_default(tmp_path, extra, policy):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n0.1,200,5\n")
    out = CliRunner().invoke(app, ["simulate", "llama-3.1-8b", "--device", "h100-80gb",
                                   "--trace", str(trace), "--json", *extra])
    assert out.exit_code == 0, out.output
    assert [p["policy"] for p in json.loads(out.stdout)["policies"]] == [policy]
    assert {steps.RELEASE_POLICIES["v1"], steps.RELEASE_POLICIES["v0"],
            steps.PLAIN_POLICY} == {"chunked-prefill", "prefill-priority", "continuous"}
