"""A client that goes away mid-stream cancels its request: no KV block stays held."""

import json
import socket
import time


def _open_stream(port: int, max_tokens: int, stream: bool = True) -> socket.socket:
    body = json.dumps({"model": "tiny-llama", "prompt": list(range(1, 41)),
                       "max_tokens": max_tokens, "ignore_eos": True, "stream": stream})
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                  + body).encode())
    return sock


def _wait_for(server, name: str, check, limit_s: float = 15) -> float:
    deadline = time.monotonic() + limit_s
    while True:
        value = server.metric(name)
        if check(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_disconnect_mid_stream_frees_every_block(server):
    cancelled_before = server.metric("servecap:requests_cancelled_total")
    sock = _open_stream(server.port, max_tokens=2000)
    received = b""
    while received.count(b"data: ") < 3:  # a few tokens streamed: the request holds blocks
        received += sock.recv(65536)
    assert server.metric("servecap:kv_blocks_used") > 0
    sock.close()
    cancelled = _wait_for(server, "servecap:requests_cancelled_total",
                          lambda v: v > cancelled_before)
    assert cancelled == cancelled_before + 1
    assert _wait_for(server, "servecap:kv_blocks_used", lambda v: v == 0) == 0
    assert server.metric("vllm:num_requests_running") == 0


def test_disconnect_while_waiting_for_a_whole_answer_frees_every_block(server):
    cancelled_before = server.metric("servecap:requests_cancelled_total")
    sock = _open_stream(server.port, max_tokens=2000, stream=False)
    assert _wait_for(server, "servecap:kv_blocks_used", lambda v: v > 0) > 0
    sock.close()
    cancelled = _wait_for(server, "servecap:requests_cancelled_total",
                          lambda v: v > cancelled_before)
    assert cancelled == cancelled_before + 1
    assert _wait_for(server, "servecap:kv_blocks_used", lambda v: v == 0) == 0
