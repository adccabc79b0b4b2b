"""Options whose values need no conversion skip typer's pydantic validators; every value reads
as typer's own coercion gives it, and a value typer refuses is refused with typer's words."""

import subprocess
import sys

import pytest

from servecap.cli import deferred_params
from servecap.cli.app import load_command

pytestmark = pytest.mark.skipif(
    deferred_params.RuntimeParam is None,
    reason=f"typer is not {deferred_params.TYPER_FOLLOWED}: nothing deferred, typer coerces all")

WORKLOAD = "workloads/chat.yaml"
ARGVS = [
    ["llama-3.1-8b", "--device", "h100-80gb", "--workload", WORKLOAD, "--json"],
    ["llama-3.1-8b", "--device", "h100-80gb", "--input-len", "1024", "--output-len", "128",
     "--rate", "8", "--num-requests", "2000", "--policy", "static", "--policy", "continuous",
     "--seed", "3", "--watermark", "0.05", "--records", "./out//r.csv"],
    ["llama-3.1-8b", "--device", "80GiB", "--workload", "nowhere.yaml", "--no-prefix-caching",
     "--kv-offloading-size", "4", "--tp", "2", "--no-async-scheduling"],
]


def _parsed(argv: list[str], deferred: bool) -> dict:
    command = load_command("simulate")
    if not deferred:  # typer's own coercion, built as it parses
        for param in command.params:
            if hasattr(param, "type_descriptor"):
                param._runtime_param = None
        command.get_help_option = type(command).get_help_option.__get__(command)
    ctx = command.make_context("simulate", list(argv))
    return {k: (type(v), v) for k, v in ctx.params.items()}


@pytest.mark.parametrize("argv", ARGVS)
def test_values_and_types_match_typers_own_coercion(argv) -> None:
    got = _parsed(argv, deferred=True)
    assert got == _parsed(argv, deferred=False)
    assert len(got) > 50


def test_defaults_build_no_validator() -> None:
    command = load_command("simulate")
    command.make_context("simulate", ARGVS[0])
    kinds = {type(p._runtime_param).__name__ for p in command.params
             if hasattr(p, "type_descriptor")}
    assert kinds == {"_Deferred"}


@pytest.mark.parametrize("flag, value, words", [
    ("--seed", "1.5", "not a whole number (got '1.5')"),
    ("--rate", "abc", "not a number (got 'abc')"),
])
def test_a_refused_value_reads_as_the_app_words_it(flag, value, words) -> None:
    """A value the deferred path hands to typer's coercion is refused as every other: one
    line, the flag, the value, in the app's words (cli/app.py), exit 2."""
    out = subprocess.run([sys.executable, "-m", "servecap.cli", "simulate", "llama-3.1-8b",
                          "--device", "h100-80gb", "--workload", WORKLOAD, flag, value],
                         capture_output=True, text=True, cwd="/tmp")
    assert out.returncode == 2
    assert out.stderr.startswith("servecap: error: Invalid value for")
    assert words in out.stderr and value in out.stderr
