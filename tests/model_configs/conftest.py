"""The CLI as these tests call it: exit code, stdout and stderr apart."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app


@pytest.fixture
def run():
    return lambda *args: CliRunner().invoke(app, [str(a) for a in args])
