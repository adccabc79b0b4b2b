"""How long `servecap serve` pauses its event loop while it parses a big request body: /health
probed every 20 ms while a body of token ids (or chat text) is sent and refused.

    .venv/bin/python bench/serve_big_body.py

Runs `servecap serve tiny-llama --max-request-bytes 64MiB` on loopback and prints, per body,
the answer's status and time and the slowest /health answer meanwhile. Bodies past 64 KiB are
parsed in a helper process, so /health should stay in milliseconds whatever the body.
"""

import http.client
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "serve"))
from serve_process import Server  # noqa: E402

BODIES = {
    "50 MiB of token ids": ("/v1/completions", {"prompt": [1] * (50 * 2**20 // 3)}),
    "4 MiB of token ids": ("/v1/completions", {"prompt": [1] * (4 * 2**20 // 3)}),
    "4 MiB of chat text": ("/v1/chat/completions",
                           {"messages": [{"role": "user", "content": "x" * 4 * 2**20}]}),
}


def _health_ms(port: int) -> float:
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/health")
    conn.getresponse().read()
    conn.close()
    return (time.monotonic() - start) * 1000


def measure(srv: Server, path: str, fields: dict) -> tuple[int, float, float]:
    body = json.dumps({"model": "tiny-llama", **fields}).encode()
    samples, done = [], threading.Event()

    def probe() -> None:
        while not done.is_set():
            samples.append(_health_ms(srv.port))
            time.sleep(0.02)

    thread = threading.Thread(target=probe)
    thread.start()
    time.sleep(0.3)
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    status = conn.getresponse().status
    took = time.monotonic() - start
    time.sleep(0.3)
    done.set()
    thread.join()
    return status, took, max(samples)


def main() -> None:
    srv = Server("--max-model-len", "2048", "--max-request-bytes", str(64 * 2**20))
    try:
        for label, (path, fields) in BODIES.items():
            status, took, worst = measure(srv, path, fields)
            print(f"{label}: HTTP {status} in {took:.2f} s; slowest /health meanwhile "
                  f"{worst:.0f} ms")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
