"""Every command's --help teaches by example: it shows the command run with real arguments."""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs" / \
    "v1_llama31_8b_h100_planner.log"
COMMANDS = ("plan", "fit", "blocks", "reconcile", "workbook", "simulate", "sweep", "cost",
            "speculate", "verify", "serve", "load", "search", "models", "devices", "diff")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_a_runnable_example(run, command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0, result.output
    # the Usage line reads "servecap CMD [OPTIONS]"; an example gives real arguments
    assert re.search(rf"servecap {command} [^\[{{\s]", result.stdout), result.stdout


def test_top_level_help_lists_every_command(run) -> None:
    out = run("--help").stdout
    for command in COMMANDS:
        assert command in out, command


@pytest.mark.parametrize("command", ["plan", "fit"])
def test_gpu_memory_utilization_help_states_each_releases_default(run, command) -> None:
    """The help said '(default 0.90)' while plan --engine vllm (the newest rules, v0.21.0)
    plans at 0.92: the figures now come from the release table (ledger/vllm_versions.py,
    each row citing vLLM's CacheConfig at its tag), and the newest is the one plan uses."""
    from servecap.ledger.vllm_versions import NEWEST, ROWS

    text = " ".join(run(command, "--help").stdout.replace("│", " ").split())
    assert "default 0.90)" not in text
    firsts = [f"{ROWS[0].default_gpu_memory_utilization:.2f}"] + [
        f"{b.default_gpu_memory_utilization:.2f} from {b.tag}"
        for a, b in zip(ROWS, ROWS[1:], strict=False)
        if a.default_gpu_memory_utilization != b.default_gpu_memory_utilization]
    assert firsts == ["0.90", "0.92 from v0.20.0"]
    assert "Default: the release's (0.90; 0.92 from v0.20.0)" in text
    planned = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm").stdout
    assert NEWEST.default_gpu_memory_utilization == 0.92
    assert "gpu_memory_utilization 0.92" in planned


@pytest.mark.parametrize("command", ["plan", "reconcile"])
def test_sampler_help_lists_what_the_command_takes_and_each_releases_default(command) -> None:
    """--sampler takes flashinfer, torch and triton (the error for another value lists them);
    the default is the release's: PyTorch's sort, Triton's masking from v0.17.1, FlashInfer
    from v0.21.0 (VLLM_USE_FLASHINFER_SAMPLER on by default; docs/reconcile.md's table)."""
    text = " ".join(CliRunner().invoke(app, [command, "--help"],
                                       env={"COLUMNS": "200"}).stdout.split())
    text = text.replace("│ ", "").replace(" │", "")
    assert "(flashinfer, torch, triton)" in text
    assert "(torch; triton from v0.17.1; flashinfer from v0.21.0)" in text
    refused = CliRunner().invoke(app, [command, "llama-3.1-8b", "--device", "h100-80gb",
                                       "--engine", "vllm", "--sampler", "bogus"]
                                 if command == "plan" else
                                 [command, str(LOG), "--model", "llama-3.1-8b", "--sampler",
                                  "bogus"])
    assert "flashinfer, torch, triton" in refused.stderr


@pytest.mark.parametrize("name", ["plan", "fit", "simulate", "search", "verify", "reconcile",
                                  "workbook"])
def test_every_command_that_takes_a_hub_id_says_so(name: str) -> None:
    """README: a Hub id works wherever a model does (plan, fit, simulate, search, verify,
    reconcile, workbook); each command's --help names it beside the other model forms."""
    text = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout
    assert "Hub id" in text, name


@pytest.mark.parametrize("command", [*COMMANDS, "pack", "prefix"])
def test_help_names_value_types_in_words_and_gives_a_flag_none(run, command: str) -> None:
    """typer labelled each option with its Python annotation: <bool> beside flags that take
    no value, <str>, <list[int]>. A flag now has no label and a value is TEXT, INTEGER,
    NUMBER or PATH."""
    out = run(command, "--help").stdout
    assert not re.search(r"<(bool|str|int|float|path|list\[\w+\])>", out), out
    rows = {words[0]: words for words in (line.strip("│ ").split() for line in out.splitlines())
            if words and words[0] in ("--help", "--version")}
    assert rows["--help"][1:3] == ["-h", "Show"], rows["--help"]
    assert rows["--version"][1] == "Print", rows["--version"]
    assert command in ("models", "devices") or re.search(r"\b(TEXT|INTEGER|NUMBER|PATH)\b",
                                                         out), out


def test_top_level_help_gives_a_flag_no_label() -> None:
    """`servecap --help` (its own process: the panels are patched once per process) showed
    '--version <bool>' while every command's help showed the flag bare."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "servecap.cli", "--help"], capture_output=True,
                         text=True, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
                         cwd=Path(__file__).resolve().parents[2].parent, check=True).stdout
    assert "--version" in out and not re.search(r"<(bool|str|int)>", out), out


@pytest.mark.parametrize("command", ["sweep", "search"])
def test_force_names_only_the_files_the_command_writes(command) -> None:
    """sweep's and search's --force said it replaces --records and --token-times files, which
    neither command writes (both refuse those flags): simulate's words, shared."""
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    line = next(line for line in result.stdout.splitlines() if "--force" in line)
    assert "Replace an existing --xlsx file." in line and "--records" not in line
    assert "No such option: --records" in CliRunner().invoke(
        app, [command, "--records", "r.csv"]).stderr


def test_search_lists_its_slos_together() -> None:
    """search's --slo-ttft stood alone in an 'SLOs' panel under the question's, apart from
    --slo-tpot and --target."""
    text = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "200"}).stdout
    panels = re.split(r"╭─ ", text)
    question = next(p for p in panels if p.startswith("The question"))
    assert all(flag in question for flag in ("--slo-ttft", "--slo-tpot", "--target"))
    assert not any(p.startswith("SLOs") for p in panels)


def test_serve_states_its_request_body_limit_with_a_unit() -> None:
    """serve's --max-request-bytes read '[default: 4194304]': a number with no unit where every
    other size in servecap's output is labelled."""
    out = CliRunner().invoke(app, ["serve", "--help"], terminal_width=80)
    words = " ".join(out.output.replace("│", " ").split())
    assert "4 MiB by default" in words and "4194304" not in words
