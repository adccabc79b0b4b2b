"""The server's edge, before a request reaches a handler: the API key (401), the body's size
(413) and read time (408), JSON parsing off the event loop, and OpenAI's error shape for
every refusal (404, 405, parse errors), so no client ever sees FastAPI's {"detail"}."""

import asyncio
import gc
import hmac
import logging
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from . import protocol as p
from .limits import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_REQUEST_BYTES, PARSE_INLINE_BYTES

log = logging.getLogger("servecap.serve")


@dataclass(frozen=True)
class EdgeOptions:
    api_key: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S


class Refused(Exception):
    """A request answered with an OpenAI error object and this status."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param = status, param


def error(message: str, status: int, param: str | None = None) -> JSONResponse:
    return JSONResponse(p.error_body(message, None, status, param), status_code=status)


def install(app: FastAPI, opts: EdgeOptions) -> None:
    """The API key check on /v1/* (vLLM's rule: /health and /metrics stay open) and the
    handlers that give every error OpenAI's shape."""

    if opts.api_key is not None:
        app.add_middleware(ApiKey, key=opts.api_key)

    @app.exception_handler(Refused)
    async def _refused(_req: Request, exc: Refused) -> JSONResponse:
        return error(str(exc), exc.status, exc.param)

    @app.exception_handler(HTTPException)
    async def _http(req: Request, exc: HTTPException) -> JSONResponse:
        message = {404: f"Not found: {req.method} {req.url.path}",
                   405: f"Method {req.method} is not allowed on {req.url.path}"}
        return error(message.get(exc.status_code, str(exc.detail)), exc.status_code)

    @app.exception_handler(Exception)
    async def _internal(_req: Request, exc: Exception) -> JSONResponse:
        log.exception("request failed inside the server")  # a bug: its own 500, logged
        return error(f"internal error ({type(exc).__name__}); the server goes on", 500)


class ApiKey:
    """Plain ASGI middleware (Starlette's BaseHTTPMiddleware would hide client disconnects
    from the handlers): /v1/* needs 'Authorization: Bearer KEY', compared in constant time."""

    def __init__(self, app, key: str) -> None:
        self.app, self.key = app, key.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1") and \
                scope["method"] != "OPTIONS" and not self._authorized(scope):
            response = error("Unauthorized: send the server's API key as 'Authorization: "
                             "Bearer KEY'", 401)
            return await response(scope, receive, send)
        return await self.app(scope, receive, send)

    def _authorized(self, scope) -> bool:
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = given.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key)


async def read_body(request: Request, opts: EdgeOptions) -> bytes:
    """The whole body within the size and time bounds: a Content-Length past the limit is
    refused before reading, a body that grows past it is cut off, a slow one times out."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > opts.max_request_bytes:
        raise _too_large(int(declared), opts)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(opts.body_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > opts.max_request_bytes:
                    raise _too_large(size, opts)
                chunks.append(chunk)
    except TimeoutError:
        raise Refused(f"the request body did not arrive within {opts.body_timeout_s:g} s",
                      408) from None
    return b"".join(chunks)


def exit_with(server_pid: int, poll_s: float = 1.0) -> None:
    """A parser helper's initializer: end the helper once the server is gone. A pool worker
    blocked on its queue never sees the server die (it holds both ends of the queue's pipe),
    and the forkserver stays up while any worker lives, so a server ended by SIGKILL, or by a
    shutdown that cannot wait, would leave both behind."""
    import os
    import threading
    import time

    def gone() -> bool:
        try:
            os.kill(server_pid, 0)
        except (ProcessLookupError, PermissionError):  # or the id names another user's
            return True
        try:  # a server that died but is not yet reaped still answers kill(0): a zombie
            with open(f"/proc/{server_pid}/stat") as stat:
                return stat.read().rpartition(")")[2].split()[0] == "Z"
        except OSError:  # no /proc: kill(0) is the check
            return False

    def watch() -> None:
        while not gone():
            time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-server", daemon=True).start()


def _too_large(size: int, opts: EdgeOptions) -> Refused:
    return Refused(f"request body of {size:,}+ bytes is over this server's limit of "
                   f"{opts.max_request_bytes:,} bytes (--max-request-bytes)", 413)


class BodyParser:
    """Bodies over PARSE_INLINE_BYTES are parsed and validated in a helper process: a parser
    holds the GIL for the whole body (50 MB: ~9 s), which in a thread would still pause every
    stream and /health. The helper sends back the validated request, or the refusal; a
    token-id prompt past max_model_len is refused there, by count (protocol.parse_bounded)."""

    def __init__(self, max_prompt_tokens: int) -> None:
        self.max_prompt_tokens = max_prompt_tokens
        self._pool = None

    def start(self) -> None:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()  # never fork a threaded server
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods
                                              else "spawn")
        self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=exit_with,
                                         initargs=(os.getpid(),))
        self._pool.submit(p.parse_bounded, p.CompletionRequest, b'{"model": "", "prompt": 1}',
                          1)  # start and import now, not on the first big request

    def stop(self) -> None:
        """Stop the helper and release its queues' five POSIX semaphores (the call queue's
        two locks and bound, the result queue's two locks) before the process exits: uvicorn
        re-raises SIGTERM once it has shut down, which ends the process before a pool left
        running (shutdown without wait) is collected, and multiprocessing's resource tracker
        then warns of 5 leaked semaphore objects. Waiting lets a parse in progress finish (a
        body of at most --max-request-bytes)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=True, cancel_futures=True)
            del pool
            gc.collect()  # the queues' finalizers unlink their semaphores now

    async def parse(self, model: type[p.SamplingFields], body: bytes) -> p.SamplingFields:
        try:
            if len(body) <= PARSE_INLINE_BYTES or self._pool is None:
                return p.parse_bounded(model, body, self.max_prompt_tokens)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, p.parse_bounded, model, body,
                                              self.max_prompt_tokens)
        except p.TooLong:
            raise
        except p.Invalid as exc:
            raise Refused(str(exc), 400, exc.param) from None
        except BrokenProcessPool:
            self.stop()
            self.start()
            raise Refused("the request parser stopped; retry", 503) from None
