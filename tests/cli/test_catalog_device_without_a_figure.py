"""A catalog device with no vendor figure for the step model (the T4 has no BF16 tensor cores,
AWS publishes no A10G tensor FLOPS) is named as such in simulate's one-line error, not called
a bare size; the flag given, it simulates."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

runner = CliRunner()
ARGS = ["--input-len", "256", "--output-len", "32", "--num-requests", "8"]


@pytest.mark.parametrize("device", ["t4-16gb", "a10g-24gb"])
def test_the_missing_figure_is_the_catalogs(device) -> None:
    out = runner.invoke(app, ["simulate", "llama-3.2-1b-instruct", "--device", device, *ARGS])
    assert out.exit_code == 2, out.output
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and "bare size" not in line
    assert f"the catalog's {device} states no dense tensor FLOPS at bf16" in line
    assert line.endswith("e.g. --flops 65TFLOPS")


def test_with_the_figure_given_it_simulates() -> None:
    out = runner.invoke(app, ["simulate", "llama-3.2-1b-instruct", "--device", "t4-16gb", "--flops",
                              "65TFLOPS", *ARGS, "--json"])
    assert out.exit_code == 0, out.output
