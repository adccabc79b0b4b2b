"""Soak: a real `servecap serve` on loopback for a bounded time, good streams mixed with a
random stream of hostile requests and client disconnects. Every good request completes
exactly, every hostile one gets its 4xx, nothing is a 5xx, the KV blocks all come back and
the server's RSS stays bounded. Bounded in time and count; it stops by itself."""

import json
import random
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from hostile_cases import CASES
from serve_process import Server
from test_hostile_requests import send

openai = pytest.importorskip("openai")
SOAK_S = 40.0  # traffic; with start-up and the drain check the test takes about a minute
KEY = "soak-key"
RSS_GROWTH_LIMIT_BYTES = 96 * 2**20


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise KeyError("VmRSS")


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.problems: list[str] = []

    def add(self, kind: str, problem: str = "") -> None:
        with self.lock:
            self.counts[kind] += 1
            if problem:
                self.problems.append(problem)


def _good(srv: Server, deadline: float, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    while time.monotonic() < deadline:
        n = rng.randint(2, 32)
        prompt = [rng.randrange(256) for _ in range(rng.randint(4, 64))]
        try:
            chunks = list(client.completions.create(
                model="tiny-llama", prompt=prompt, max_tokens=n, stream=True,
                temperature=rng.choice([0, 0.8]), seed=rng.randrange(2**63),
                stream_options={"include_usage": True},
                extra_body={"ignore_eos": True, "min_tokens": n}))
        except openai.APIError as exc:
            tally.add("good_failed", f"good request failed: {exc}")
            continue
        tokens = [c for c in chunks if c.choices]
        exact = (len(tokens) == n and tokens[-1].choices[0].finish_reason == "length"
                 and chunks[-1].usage.completion_tokens == n)
        tally.add("good" if exact else "good_inexact", "" if exact else f"inexact: {n}")


def _hostile(srv: Server, deadline: float, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    auth = {"Authorization": f"Bearer {KEY}"}
    while time.monotonic() < deadline:
        name, method, path, data, status, _ = rng.choice(CASES)
        headers = auth
        if rng.random() < 0.15:
            name, status, headers = "no key", 401, {}
            method, path, data = "POST", "/v1/completions", b'{"model": "tiny-llama"}'
        got, payload, _ = send(srv.port, method, path, data, headers)
        ok = got == status and payload is not None and payload["error"]["code"] == got
        tally.add("hostile" if ok else "hostile_wrong",
                  "" if ok else f"{name}: {got} (wanted {status}) {payload}")
        if got >= 500:
            tally.add("5xx", f"{name}: {got}")


def _disconnects(srv: Server, deadline: float, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        body = json.dumps({"model": "tiny-llama", "prompt": list(range(1, 20)),
                           "max_tokens": 200, "ignore_eos": True,
                           "stream": rng.random() < 0.8}).encode()
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     + KEY.encode() + b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(rng.uniform(0.0, 0.3))  # gone mid-stream, or before the first token
        sock.close()
        tally.add("disconnect")


def _wait_for(srv: Server, name: str, want: float, limit_s: float = 30) -> float:
    deadline = time.monotonic() + limit_s
    while (value := srv.metric(name)) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return value


def test_soak_good_streams_hostile_requests_and_disconnects() -> None:
    srv = Server("--max-model-len", "512", env={"VLLM_API_KEY": KEY})
    try:
        send(srv.port, "POST", "/v1/completions", json.dumps(
            {"model": "tiny-llama", "prompt": [1, 2], "max_tokens": 8}).encode(),
            {"Authorization": f"Bearer {KEY}"})  # warm up before the first RSS reading
        rss_start = _rss_bytes(srv.proc.pid)
        tally, start = Tally(), time.monotonic()
        deadline = start + SOAK_S
        workers = [(_good, 3), (_hostile, 2), (_disconnects, 1)]
        threads = [threading.Thread(target=fn, args=(srv, deadline, tally, 100 * k + i))
                   for k, (fn, count) in enumerate(workers) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(SOAK_S + 120)
        took = time.monotonic() - start
        blocks = _wait_for(srv, "servecap:kv_blocks_used", 0)
        running = _wait_for(srv, "vllm:num_requests_running", 0)
        rss_end = _rss_bytes(srv.proc.pid)
    finally:
        srv.stop()
    print(f"\nsoak: {sum(tally.counts.values())} requests in {took:.1f} s: "
          f"{dict(tally.counts)}; server RSS {rss_start / 2**20:.1f} -> "
          f"{rss_end / 2**20:.1f} MiB")
    assert not any(t.is_alive() for t in threads)
    assert tally.problems == [], tally.problems[:5]
    assert tally.counts["good"] >= 10 and tally.counts["hostile"] >= 20
    assert tally.counts["disconnect"] >= 5
    assert blocks == 0 and running == 0
    assert rss_end - rss_start < RSS_GROWTH_LIMIT_BYTES
