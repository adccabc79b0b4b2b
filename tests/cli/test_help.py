"""Every command's --help teaches by example: it shows the command run with real arguments."""

import re

import pytest

COMMANDS = ("plan", "fit", "blocks", "reconcile", "workbook", "simulate", "sweep", "cost",
            "speculate", "verify", "serve", "load", "search", "models", "devices")


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
