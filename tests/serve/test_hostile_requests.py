"""Every hostile request is refused at the edge with its own status and OpenAI's error object,
before any stream starts; the server stays healthy and holds no block afterwards."""

import http.client
import json

import pytest
from hostile_cases import CASES


def send(port: int, method: str, path: str, data: bytes, headers: dict | None = None
         ) -> tuple[int, dict | None, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=data or None, headers={
            "Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        kind = resp.getheader("content-type", "")
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw), kind
    except ValueError:
        return resp.status, None, kind


def assert_openai_error(status: int, payload, phrase: str) -> None:
    assert payload is not None and set(payload) == {"error"}, payload
    error = payload["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["code"] == status and isinstance(error["type"], str) and error["type"]
    assert phrase in error["message"], (phrase, error["message"])


@pytest.mark.parametrize(("method", "path", "data", "status", "phrase"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_request_is_refused_with_its_status(server, method, path, data, status,
                                                    phrase) -> None:
    got, payload, kind = send(server.port, method, path, data)
    assert got == status, payload
    assert kind.startswith("application/json")  # never a 200 SSE stream that fails later
    assert_openai_error(status, payload, phrase)


def test_after_every_hostile_case_the_server_is_healthy_and_holds_nothing(server) -> None:
    for _, method, path, data, _, _ in CASES:
        send(server.port, method, path, data)
    assert send(server.port, "GET", "/health", b"")[0] == 200
    assert server.metric("servecap:kv_blocks_used") == 0
    good = json.dumps({"model": "tiny-llama", "prompt": [1, 2, 3], "max_tokens": 3}).encode()
    status, payload, _ = send(server.port, "POST", "/v1/completions", good)
    assert status == 200 and payload["usage"]["completion_tokens"] == 3


def test_chat_content_left_out_or_null_on_the_assistant_is_served_as_vllm_serves_it(
        server) -> None:
    """vLLM (vllm/entrypoints/chat_utils.py, _parse_chat_message_content) reads content None
    as no parts: a message without content counts as empty, and an assistant turn may hold
    null content (it carries tool_calls then). Only null on another role is a 400 (the
    hostile cases), with param messages.N.content."""
    for messages in ([{"role": "user"}],
                     [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
                      {"role": "user", "content": "and?"}]):
        data = json.dumps({"model": "tiny-llama", "max_tokens": 2, "messages": messages})
        status, payload, _ = send(server.port, "POST", "/v1/chat/completions", data.encode())
        assert status == 200 and payload["usage"]["completion_tokens"] == 2, payload
    data = json.dumps({"model": "tiny-llama", "messages": [
        {"role": "user", "content": "hi"}, {"role": "user", "content": None}]}).encode()
    status, payload, _ = send(server.port, "POST", "/v1/chat/completions", data)
    assert status == 400 and payload["error"]["param"] == "messages.1.content", payload
    assert payload["error"]["type"] == "BadRequestError"


def test_a_body_over_the_limit_is_413_before_it_is_read(server) -> None:
    status, payload, _ = send(server.port, "POST", "/v1/completions", b"x",
                              {"Content-Length": str(50 * 2**20)})
    assert status == 413
    assert_openai_error(413, payload, "--max-request-bytes")


def test_a_chunked_body_growing_past_the_limit_is_413(server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    piece = b"[" + b"1," * (2**20 // 2)
    conn.putrequest("POST", "/v1/completions")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    try:
        for _ in range(8):  # 8 MiB offered against a 4 MiB limit
            conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.send(b"0\r\n\r\n")
    except OSError:
        pass  # the server may stop reading once it has answered
    resp = conn.getresponse()
    assert resp.status == 413
    assert_openai_error(413, json.loads(resp.read()), "over this server's limit")
    conn.close()


def _padded(**fields) -> bytes:
    """A body past 64 KiB (whitespace is valid JSON), so the helper process parses it."""
    return json.dumps({"model": "tiny-llama", **fields}).encode()[:-1] + b" " * 70_000 + b"}"


@pytest.mark.parametrize(("data", "status", "phrase"), [
    (_padded(prompt=[1, 2, 3], max_tokens=4), 200, ""),
    (_padded(prompt=[1, 2, 3], seed=2**64), 400, "seed"),
    (_padded(prompt=[1] * 30_000), 400, "your request has 30000 input tokens"),
    (_padded(prompt=[[1] * 30_000]), 400, "your request has 30000 input tokens"),
    (b"[" * 70_000, 400, "JSON"),
])
def test_big_bodies_are_parsed_beside_the_event_loop_with_the_same_answers(
        server, data, status, phrase) -> None:
    got, payload, _ = send(server.port, "POST", "/v1/completions", data)
    assert got == status, payload
    if status == 200:
        assert payload["usage"]["completion_tokens"] == 4
    else:
        assert_openai_error(status, payload, phrase)
