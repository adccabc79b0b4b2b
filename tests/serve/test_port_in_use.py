"""A port already listened on is bad input: one line and exit 2, before the weights load."""

import socket

from typer.testing import CliRunner

from servecap.cli.app import app


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "tiny-llama", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
