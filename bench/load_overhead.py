"""`servecap load`'s own overhead: requests/s and streamed tokens/s against a stub that answers
instantly, the client on one core, so its measurements are not the bottleneck.

    .venv/bin/python bench/load_overhead.py [NUM_REQUESTS] [OUTPUT_TOKENS] [CONCURRENCY]

The stub (a raw asyncio HTTP/1.1 server in a second process, on another core when there is
one) answers every completion with OUTPUT_TOKENS SSE chunks shaped like vLLM's, one HTTP
chunk each, then the usage chunk and [DONE]. The client is servecap.load's closed loop,
parsing every chunk as in a real run. Target: >= 50,000 streamed tokens/s on one core.
"""

import asyncio
import json
import multiprocessing
import os
import resource
import socket
import sys
import time

from servecap.load.report import measured_seqs, summarize
from servecap.load.runner import LoadSpec, base_spec, run_load
from servecap.sim.sampling import Request

TARGET_TOKENS_PER_S = 50_000


def _chunk(text: str, finish: str | None) -> bytes:
    body = {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": "stub",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}
    event = f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()
    return f"{len(event):x}\r\n".encode() + event + b"\r\n"


def _response(num_tokens: int) -> bytes:
    usage = {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": "stub",
             "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": num_tokens,
                                      "total_tokens": num_tokens + 1}}
    parts = [_chunk(" tok", None) for _ in range(num_tokens - 1)] + [_chunk(" tok", "length")]
    for text in (f"data: {json.dumps(usage)}\n\n", "data: [DONE]\n\n"):
        parts.append(f"{len(text):x}\r\n{text}\r\n".encode())
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    return head + b"".join(parts) + b"0\r\n\r\n"


async def _serve_connection(reader, writer, cache: dict) -> None:
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        body = json.loads(await reader.readexactly(length))
        n = body["max_tokens"]
        if n not in cache:
            cache[n] = _response(n)
        writer.write(cache[n])
        await writer.drain()


def _stub(sock: socket.socket, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    cache: dict[int, bytes] = {}

    async def main() -> None:
        async def handle(reader, writer):
            try:
                await _serve_connection(reader, writer, cache)
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
        server = await asyncio.start_server(handle, sock=sock)
        await server.serve_forever()

    asyncio.run(main())


def main(num_requests: int = 400, output_tokens: int = 256, concurrency: int = 32) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    client_cpu, stub_cpu = cpus[0], (cpus[1] if len(cpus) > 1 else None)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    stub = multiprocessing.get_context("fork").Process(target=_stub, args=(sock, stub_cpu),
                                                       daemon=True)
    stub.start()
    os.sched_setaffinity(0, {client_cpu})
    requests = tuple(Request(i, 0.0, 8, output_tokens) for i in range(num_requests))
    spec = base_spec(f"http://127.0.0.1:{port}/v1", "stub", requests, concurrency=concurrency)
    try:
        for _ in range(3):
            _run(spec, num_requests, output_tokens, concurrency)
    finally:
        stub.terminate()
        stub.join()
    stub_cpu_s = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"stub CPU over the three runs: {stub_cpu_s.ru_utime + stub_cpu_s.ru_stime:.2f} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall figures "
          "shrink when other processes share the cores)")


def _run(spec: LoadSpec, num_requests: int, output_tokens: int, concurrency: int) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    sent, start = asyncio.run(run_load(spec))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    report = summarize(sent, measured_seqs(sent, start), start)
    assert report["completed"] == num_requests and not report["output_token_mismatches"]
    tokens = num_requests * output_tokens
    verdict = "meets" if tokens / cpu >= TARGET_TOKENS_PER_S else "MISSES"
    print(f"{num_requests} requests x {output_tokens} tokens, concurrency {concurrency}: "
          f"wall {wall:.2f} s, client CPU {cpu:.2f} s; {num_requests / wall:,.0f} requests/s, "
          f"{tokens / wall:,.0f} tokens/s wall; {tokens / cpu:,.0f} tokens per client "
          f"CPU-second ({verdict} the {TARGET_TOKENS_PER_S:,} target)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
