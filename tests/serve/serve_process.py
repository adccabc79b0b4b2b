"""A real `servecap serve` process on a free loopback port, started and stopped by a test."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

STARTUP_S = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def servecap(*args: str, timeout: float = 60, cwd=None) -> subprocess.CompletedProcess:
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "servecap.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


class Server:
    def __init__(self, *extra: str, env: dict | None = None, model: str = "tiny-llama",
                 api_key: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} | (env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "servecap.cli", "serve", model, "--port",
             str(self.port), *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env)
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"servecap serve exited: {self.proc.stdout.read()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"servecap serve did not answer /health within {STARTUP_S} s")

    def metric(self, name: str) -> float:
        """The value of an unlabelled-by-reason gauge or counter from /metrics."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith(name + "{"):
                    return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
