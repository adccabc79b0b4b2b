"""The HTTP surface: /v1/completions, /v1/chat/completions (SSE or one JSON), /v1/models,
/health and /metrics, over one ServingLoop."""

import asyncio
import json
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from servecap.ledger.errors import SpecError

from . import protocol as p
from .prom_metrics import ServerMetrics
from .serving_loop import Generation, Overloaded, ServingLoop, Stream
from .tokenizer import chat_prompt

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's documented default for /v1/completions
DISCONNECT_POLL_S = 0.5


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.kind = status, kind


def create_app(serving: ServingLoop, metrics: ServerMetrics, tokenizer, model_name: str,
               max_model_len: int) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        serving.start()
        yield
        serving.stop()

    app = FastAPI(title="servecap serve", lifespan=lifespan)
    api = _Api(serving, tokenizer, model_name, max_model_len)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return _error(f"{where}: {first.get('msg', 'invalid request')}", 400, "BadRequestError")

    @app.exception_handler(BadRequest)
    async def _bad(_req: Request, exc: BadRequest) -> JSONResponse:
        return _error(str(exc), exc.status, exc.kind)

    @app.post("/v1/completions")
    async def completions(body: p.CompletionRequest, request: Request):
        return await api.generate(body, api.completion_prompt(body.prompt), False, request)

    @app.post("/v1/chat/completions")
    async def chat(body: p.ChatRequest, request: Request):
        return await api.generate(body, api.encode(chat_prompt(body.messages)), True, request)

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                            "owned_by": "servecap",
                                            "max_model_len": max_model_len}]}

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200 if serving.alive else 503)

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    return app


def _error(message: str, status: int, kind: str) -> JSONResponse:
    return JSONResponse(p.error_body(message, kind, status), status_code=status)


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


class _Api:
    def __init__(self, serving: ServingLoop, tokenizer, model_name: str, max_model_len: int):
        self.serving, self.tok = serving, tokenizer
        self.model_name, self.max_model_len = model_name, max_model_len

    def encode(self, text: str) -> list[int]:
        try:
            return self.tok.encode(text)
        except SpecError as exc:
            raise BadRequest(exc.line()) from None

    def completion_prompt(self, prompt) -> list[int]:
        """One prompt per request: text, token ids, or a one-element list of either."""
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
            if len(prompt) != 1:
                raise BadRequest(f"prompt: {len(prompt)} prompts in one request; this server "
                                 "takes one prompt per request")
            prompt = prompt[0]
        ids = self.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise BadRequest("prompt: empty; a request needs at least one prompt token")
        return ids

    def generation(self, body: p.SamplingFields, ids: list[int], chat: bool) -> Generation:
        if body.model != self.model_name:
            raise BadRequest(f"The model `{body.model}` does not exist; this server serves "
                             f"`{self.model_name}`", 404, "NotFoundError")
        room = self.max_model_len - len(ids)
        max_tokens = body.max_completion_tokens or body.max_tokens or \
            (room if chat else DEFAULT_COMPLETION_MAX_TOKENS)
        if len(ids) + max_tokens > self.max_model_len:
            raise BadRequest(f"This model's maximum context length is {self.max_model_len} "
                             f"tokens; the request asks for {len(ids)} prompt + {max_tokens} "
                             "output tokens")
        if body.min_tokens > max_tokens:
            raise BadRequest(f"min_tokens = {body.min_tokens}: must be <= max_tokens "
                             f"({max_tokens})")
        return Generation(tuple(ids), max_tokens, body.min_tokens, body.ignore_eos,
                          body.temperature, body.seed or 0)

    async def generate(self, body: p.SamplingFields, ids: list[int], chat: bool,
                       request: Request):
        gen = self.generation(body, ids, chat)
        try:
            stream = self.serving.submit(gen)
        except Overloaded as exc:
            raise BadRequest(str(exc), 429, "TooManyRequests") from None
        rid = p.new_id("chatcmpl" if chat else "cmpl")
        if body.stream:
            events = self._sse(stream, rid, chat, body.include_usage)
            return StreamingResponse(events, media_type="text/event-stream")
        return await self._collect(stream, rid, chat, request)

    async def _collect(self, stream: Stream, rid: str, chat: bool,
                       request: Request) -> dict | Response:
        """Wait for every token while a watcher cancels the request if the client goes."""
        tokens: list[int] = []
        watcher = asyncio.create_task(self._watch(request, stream))
        try:
            while True:
                event = await stream.events.get()
                if event.finish_reason == "error":
                    raise BadRequest(event.message)
                if event.finish_reason == "cancelled":
                    return Response(status_code=499)  # nobody is listening
                tokens += event.token_ids
                if event.finish_reason:
                    break
        finally:
            watcher.cancel()
            self.serving.cancel(stream)
        used = p.usage(len(stream.gen.prompt_token_ids), len(tokens))
        body = p.chat_body if chat else p.completion_body
        return body(rid, self.model_name, self.tok.decode(tokens), event.finish_reason, used)

    async def _watch(self, request: Request, stream: Stream) -> None:
        while not stream.done:
            await asyncio.sleep(DISCONNECT_POLL_S)
            if await request.is_disconnected():
                self.serving.cancel(stream)
                return

    async def _sse(self, stream: Stream, rid: str, chat: bool, include_usage: bool):
        """One chunk per token; the last carries finish_reason; then usage, then [DONE]. A
        client that goes away cancels the request (the finally), freeing its blocks."""
        name, num_out = self.model_name, 0
        try:
            if chat:
                yield _sse(p.chat_chunk(rid, name, {"role": "assistant", "content": ""}, None))
            while True:
                event = await stream.events.get()
                if event.finish_reason == "error":
                    yield _sse(p.error_body(event.message, "BadRequestError", 400))
                    break
                for i, token in enumerate(event.token_ids):
                    finish = event.finish_reason if i == len(event.token_ids) - 1 else None
                    text = self.tok.decode([token])
                    yield _sse(p.chat_chunk(rid, name, {"content": text}, finish) if chat
                               else p.completion_chunk(rid, name, text, finish))
                num_out += len(event.token_ids)
                if event.finish_reason:
                    break
            if include_usage:
                obj = "chat.completion.chunk" if chat else "text_completion"
                used = p.usage(len(stream.gen.prompt_token_ids), num_out)
                yield _sse(p.usage_chunk(rid, name, obj, used))
            yield "data: [DONE]\n\n"
        finally:
            self.serving.cancel(stream)
