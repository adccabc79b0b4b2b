"""Shared CLI fixtures: a runner that keeps stdout and stderr apart."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app


@pytest.fixture
def run():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke
