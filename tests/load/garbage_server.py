"""A real HTTP server that misbehaves: the first path segment names how. POST /MODE/v1/completions
answers each request in that mode; GET /A+B/v1/models lists models A and B;
GET /MODE/metrics serves a /metrics body with blank,
whitespace-only and cut-short lines between valid samples. Runs in a thread of the test."""

import http.server
import itertools
import json
import threading

GOOD_TOKENS = 4


def _chunk(text: str) -> bytes:
    body = {"id": "x", "object": "text_completion", "model": "m",
            "choices": [{"index": 0, "text": text, "finish_reason": None}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def good_stream() -> bytes:
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": GOOD_TOKENS,
                                      "total_tokens": 8 + GOOD_TOKENS}}
    return (b"".join(_chunk("t") for _ in range(GOOD_TOKENS))
            + b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")


def _bad(payload: bytes) -> bytes:
    return _chunk("t") + b"data: " + payload + b"\n\ndata: [DONE]\n\n"


STREAMS = {  # mode: the whole 200 response body
    "ok": good_stream(),
    "not_json": _bad(b"not json"),
    "number": _bad(b"5"),
    "choices_strings": _bad(b'{"choices": ["x"]}'),
    "usage_no_completion_tokens": _chunk("t") + b'data: {"choices": [], "usage": '
                                  b'{"prompt_tokens": 8}}\n\ndata: [DONE]\n\n',
    "usage_tokens_text": _chunk("t") + b'data: {"choices": [], "usage": '
                         b'{"completion_tokens": "4"}}\n\ndata: [DONE]\n\n',
    "bad_utf8_event": _bad(b'{"choices": [{"text": "\xff\xfe"}]}'),
    "text_a_number": _bad(b'{"choices": [{"text": 7}]}'),
    "error_event": _bad(b'{"error": {"message": "boom", "code": 500}}'),
    "no_done": _chunk("t") * 3,
    "endless_line": b"data: " + b"x" * (5 * 2**20),
}
METRICS = (b"# HELP vllm:num_requests_running x\n\nvllm:num_requests_running{a=\"1\"} 3\n"
           b"   \n\t\nvllm:num_requests_waiting\nvllm:kv_cache_usage_perc{a=\"1\"} abc\n"
           b"vllm:num_requests_waiting{a=\"1\"} 2\n\xff\xfe\nvllm:kv_cache_usage_perc{x} NaN\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = itertools.count()

    def log_message(self, *_args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.endswith("/v1/models"):  # /MODE/v1/models: MODE names the ids, by '+'
            ids = self.path.strip("/").split("/")[0].split("+")
            listing = {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}
            return self._send(200, json.dumps(listing).encode(), "application/json")
        return self._send(200, METRICS, "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.path.strip("/").split("/")[0]
        if mode == "one_bad_in_20":
            mode = "not_json" if next(self.counter) % 20 == 7 else "ok"
        if mode == "http500_bad_utf8":
            return self._send(500, b"\xff\xfeinternal \x80 error", "text/plain")
        if mode == "not_http":
            self.wfile.write(b"HELLO THERE\r\n\r\n\x00\x01")
            self.close_connection = True
            return None
        if mode == "close_mid_stream":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Content-Length: 100000\r\n\r\n" + _chunk("t"))
            self.close_connection = True
            return None
        return self._send(200, STREAMS[mode], "text/event-stream")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class GarbageServer:
    def __init__(self) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
