"""A command's --help names only flags it takes, or another program's flag said to be that
program's: cost's and speculate's --engine said 'plain with --speed-of-light or
--coefficients', and prefix's '... or --coefficients' and its --output-len 'with
--input-len', none of which those commands take; prefix's --rate read as simulate's Poisson
rate 'replacing the workload's' where prefix spaces the trace's requests evenly."""

import re

import pytest
from typer.testing import CliRunner

from servecap.cli.app import COMMANDS, app, load_command

# flags of other programs or commands, each named as theirs where it appears
THEIRS = {"--help", "--model-path", "--eplb-config", "--max-concurrency",
          "--metric-percentiles", "--mem-fraction-static", "--gpu-memory-utilization",
          "--device", "--coefficients"}
THEIRS_IN = {"--model-path": "sglang.launch_server --model-path",
             "--eplb-config": "vLLM --eplb-config's",
             "--max-concurrency": "vllm bench serve --max-concurrency",
             "--metric-percentiles": "vllm bench serve --metric-percentiles",
             "--mem-fraction-static": "SGLang's --mem-fraction-static",
             "--gpu-memory-utilization": "vllm serve MODEL --gpu-memory-utilization",
             "--device": "is a --device for plan",
             "--coefficients": "the simulator's --coefficients"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_names_only_flags_the_command_takes(name) -> None:
    params = load_command(name).params
    own = {flag for param in params for flag in (*param.opts, *param.secondary_opts)}
    text = " ".join(CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
                    .stdout.replace("│", " ").split())
    foreign = {flag for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)
               if flag not in own}
    assert foreign <= THEIRS, (name, foreign - THEIRS)
    for flag in foreign - {"--help"}:
        assert THEIRS_IN[flag] in text, (name, flag)


def test_prefix_rate_says_how_prefix_spaces_requests(run) -> None:
    text = " ".join(run("prefix", "--help").stdout.replace("│", " ").split())
    assert "one every 1/RATE seconds in file order, in place of the trace's arrival_s" in text
    assert "Poisson" not in text
