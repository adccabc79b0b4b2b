"""One knob answers to the same names in every command that has it: speculate took --context
but not vLLM's --max-model-len, search --max-model-len but not --context and --kv-dtype but
not vLLM's --kv-cache-dtype, load and search --rate but not vllm bench's --request-rate, and
load --num-requests but not --num-prompts, each of which the other commands take."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import COMMANDS, app, load_command

# each knob's names; a command with one of them has them all
SAME = [("--context", "--max-model-len"), ("--kv-dtype", "--kv-cache-dtype"),
        ("--rate", "--request-rate")]
# --num-requests is a ceiling in sweep, cost and search; where it is the count sent, vllm
# bench serve's --num-prompts too
COUNT_SENT = ("simulate", "load")


def _names(command: str) -> set[str]:
    return {name for param in load_command(command).params
            if param.param_type_name == "option"
            for name in (*param.opts, *param.secondary_opts)}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_knob_has_every_name_where_it_has_one(command) -> None:
    names = _names(command)
    for group in SAME:
        if names & set(group):
            assert set(group) <= names, (command, group)
    if command in COUNT_SENT:
        assert {"--num-requests", "--num-prompts"} <= names


@pytest.mark.parametrize("args", [
    ("speculate", "llama-3.1-8b", "--device", "h100-80gb", "--max-model-len", "0"),
    ("search", "llama-3.1-8b", "--context", "x"),
    ("search", "llama-3.1-8b", "--kv-cache-dtype", "fp8", "--request-rate", "x")])
def test_the_other_name_is_taken(args) -> None:
    """Each alias reaches its option: the value is judged, never 'No such option'."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2
    assert "No such option" not in result.stderr
