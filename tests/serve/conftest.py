"""The session's tiny-llama server; tests that need their own start a Server themselves."""

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("aiohttp")

from serve_process import Server  # noqa: E402


@pytest.fixture(scope="session")
def server():
    srv = Server("--max-model-len", "2048")  # room for a stream long enough to walk away from
    yield srv
    srv.stop()
