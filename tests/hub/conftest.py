"""Fixtures: a Hub served from this process, and the real CLI run against it."""

import os
import subprocess
import sys

import pytest
from hub_server import Hub, serve


@pytest.fixture
def hub():
    state = Hub()
    server = serve(state)
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def servecap(hub, tmp_path):
    """Run the real CLI in a fresh process, its Hub and cache pointed at the test's own."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("HF_", "HUGGINGFACE_")) and "PROXY" not in k.upper()}
    base |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"),
             "HF_HUB_DISABLE_TELEMETRY": "1", "NO_PROXY": "127.0.0.1", "COLUMNS": "200"}

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "servecap.cli", *args], cwd=tmp_path,
                              env=base | env, capture_output=True, text=True, timeout=120)

    return run
