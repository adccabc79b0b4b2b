"""vLLM's and most CLIs' spellings: -h is --help and --version answers, on the app and on
every command, with the installed distribution's version."""

from importlib.metadata import version

import pytest

from servecap.cli.app import COMMANDS

INSTALLED = f"servecap {version('servecap')}"


@pytest.mark.parametrize("args", [(), *((name,) for name in COMMANDS)])
def test_version(run, args) -> None:
    result = run(*args, "--version")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == INSTALLED


@pytest.mark.parametrize("args", [(), *((name,) for name in COMMANDS)])
def test_h_is_help(run, args) -> None:
    short, long = run(*args, "-h"), run(*args, "--help")
    assert short.exit_code == 0, short.output
    assert short.stdout == long.stdout and "Usage: servecap" in short.stdout


def test_a_device_prefix_plans_as_its_catalog_name(run) -> None:
    """'h200' is h200-141gb for plan as it is for search's --devices."""
    short = run("plan", "llama-3.1-8b", "--device", "h200", "--json")
    full = run("plan", "llama-3.1-8b", "--device", "h200-141gb", "--json")
    assert short.exit_code == 0, short.output
    assert short.stdout == full.stdout
