"""serve as a production edge: the API key (401), slow clients (header and body timeouts) and a
bounded shutdown that ends in-flight streams with an error event."""

import json
import re
import signal
import socket
import time

import pytest
from serve_process import Server

openai = pytest.importorskip("openai")
KEY = "k-3f9a"


@pytest.fixture(scope="module")
def guarded():
    srv = Server("--max-model-len", "2048", "--api-key", KEY, "--header-timeout", "1",
                 "--body-timeout", "1", "--shutdown-timeout", "1")
    yield srv
    srv.stop()


def _client(srv: Server, key: str) -> "openai.OpenAI":
    return openai.OpenAI(base_url=srv.url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_without_the_key_every_v1_route_is_401(guarded) -> None:
    for key in ("wrong", KEY + "x", ""):
        with pytest.raises(openai.AuthenticationError) as refused:
            _client(guarded, key or "-").completions.create(model="tiny-llama", prompt=[1],
                                                            max_tokens=1)
        assert refused.value.status_code == 401
        assert refused.value.body["code"] == 401  # OpenAI's error object
    with pytest.raises(openai.AuthenticationError):
        _client(guarded, "wrong").models.list()


def test_with_the_key_it_serves_and_health_and_metrics_stay_open(guarded) -> None:
    out = _client(guarded, KEY).completions.create(model="tiny-llama", prompt=[1, 2],
                                                   max_tokens=3)
    assert out.usage.completion_tokens == 3
    assert guarded.metric("servecap:kv_blocks_used") == 0  # /metrics needs no key
    raw = socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
    raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert raw.recv(100).startswith(b"HTTP/1.1 200")
    raw.close()


def _closed_within(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    start, data = time.monotonic(), b""
    sock.settimeout(limit_s)
    while True:
        piece = sock.recv(4096)
        if not piece:
            return data, time.monotonic() - start
        data += piece


def test_a_trickled_request_head_is_closed_after_the_header_timeout(guarded) -> None:
    sock = socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    data, took = _closed_within(sock, 10)
    assert data == b"" and took < 6
    idle = socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
    assert _closed_within(idle, 10)[1] < 6  # a connection that sends nothing goes too


def test_half_a_body_is_408_after_the_body_timeout(guarded) -> None:
    sock = socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + KEY.encode() + b"\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 200\r\n\r\n{\"model\": ")
    data, took = _closed_within(sock, 10)
    assert data.startswith(b"HTTP/1.1 408") and took < 6
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"]["code"] == 408


def _open_stream(port: int) -> socket.socket:
    body = json.dumps({"model": "tiny-llama", "prompt": list(range(1, 30)), "max_tokens": 400,
                       "ignore_eos": True, "stream": True}).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + KEY.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def test_shutdown_is_bounded_and_ends_each_stream_with_an_error_event() -> None:
    # 0 s: what runs is ended at once (tiny-llama would finish a 400-token stream in a
    # second or two of grace on a quiet machine, so no grace keeps the test exact)
    srv = Server("--max-model-len", "2048", "--api-key", KEY, "--shutdown-timeout", "0",
                 "--body-timeout", "60")
    try:
        streams = [_open_stream(srv.port) for _ in range(8)]
        for sock in streams:
            got = b""
            while got.count(b"data: ") < 2:  # each stream has begun
                got += sock.recv(65536)
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n"
                     b"\r\n{")  # half a body: it must not hold the shutdown
        start = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        tails = [_closed_within(sock, 30)[0] for sock in streams]
        srv.proc.wait(timeout=30)
        took = time.monotonic() - start
    finally:
        srv.stop()
    assert took < 0 + 2 + 8, took  # --shutdown-timeout, the hard margin, a loaded machine
    for tail in tails:  # chunked transfer encoding: find the events in the raw bytes
        events = re.findall(rb'data: (\{"error".*?\})\n\n', tail)
        assert len(events) == 1, tail[-300:]
        error = json.loads(events[0])["error"]
        assert error["code"] == 503 and "shutting down" in error["message"]
        assert b"data: [DONE]" in tail.split(events[0])[1]


def test_sigterm_stops_quietly_and_releases_the_body_parsers_semaphores() -> None:
    """The helper that parses bodies over 64 KiB runs in a process pool whose queues hold five
    POSIX semaphores; a stop that leaves the pool to be collected after uvicorn re-raises
    SIGTERM made multiprocessing's resource tracker print 'There appear to be 5 leaked
    semaphore objects'. A body over the inline limit goes through the helper first."""
    import urllib.request

    srv = Server("--max-model-len", "2048")
    try:
        big = json.dumps({"model": "tiny-llama", "max_tokens": 1,
                          "prompt": "a" * 100, "user": "x" * 70_000}).encode()
        request = urllib.request.Request(srv.url + "/v1/completions", data=big,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as resp:
            assert resp.status == 200
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=30)
        output = srv.proc.stdout.read()
    finally:
        srv.stop()
    assert "leaked" not in output and "Traceback" not in output, output
    assert "resource_tracker" not in output, output
