"""The HTTP surface: /v1/completions, /v1/chat/completions (SSE or one JSON), /v1/models,
/health and /metrics, over one ServingLoop. Every request is read and checked at the edge
(edge.py, admit.py) before it is admitted, so a refusal is an HTTP status, never a stream
that starts with 200 and then fails."""

import asyncio
import json
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from . import edge
from . import protocol as p
from .admit import Admission
from .prom_metrics import ServerMetrics
from .serving_loop import Overloaded, ServingLoop, ShuttingDown, Stream

DISCONNECT_POLL_S = 0.5


def create_app(serving: ServingLoop, metrics: ServerMetrics, tokenizer, model_name: str,
               max_model_len: int, opts: edge.EdgeOptions | None = None) -> FastAPI:
    parser = edge.BodyParser(max_model_len)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        parser.start()
        serving.start()
        yield
        serving.stop()
        parser.stop()

    app = FastAPI(title="servecap serve", lifespan=lifespan, openapi_url=None, docs_url=None,
                  redoc_url=None)
    opts = opts or edge.EdgeOptions()
    edge.install(app, opts)
    admission = Admission(tokenizer, model_name, max_model_len,
                          serving.engine.model.spec.vocab_size)
    api = _Api(serving, admission, opts, parser)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await api.body(p.CompletionRequest, request)
        return await api.generate(body, await admission.completion_ids(body), False, request)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await api.body(p.ChatRequest, request)
        return await api.generate(body, await admission.chat_ids(body), True, request)

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                            "owned_by": "servecap",
                                            "max_model_len": max_model_len}]}

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200 if serving.alive and not serving.draining else 503)

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    return app


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


class _Api:
    def __init__(self, serving: ServingLoop, admission: Admission, opts: edge.EdgeOptions,
                 parser: edge.BodyParser):
        self.serving, self.admission, self.opts, self.parser = serving, admission, opts, parser
        self.tok, self.model_name = admission.tok, admission.model_name

    async def body(self, model: type[p.SamplingFields], request: Request) -> p.SamplingFields:
        raw = await edge.read_body(request, self.opts)
        try:
            return await self.parser.parse(model, raw)
        except p.TooLong as exc:
            raise self.admission.too_long(exc.num_tokens) from None

    async def generate(self, body: p.SamplingFields, ids: list[int], chat: bool,
                       request: Request):
        gen = self.admission.generation(body, ids, chat)
        try:
            stream = self.serving.submit(gen)
        except ValueError as exc:  # the engine's own check: longer than the whole KV pool
            raise edge.Refused(str(exc), 400, "max_tokens") from None
        except Overloaded as exc:
            raise edge.Refused(str(exc), 429) from None
        except ShuttingDown as exc:
            raise edge.Refused(str(exc), 503) from None
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
                    raise edge.Refused(event.message, event.status)
                if event.finish_reason == "cancelled":
                    return Response(status_code=499)  # nobody is listening
                tokens += event.token_ids
                if event.finish_reason:
                    break
        finally:
            watcher.cancel()
            self.serving.cancel(stream)
        used = p.usage(len(stream.gen.prompt_token_ids), len(tokens), stream.num_cached_tokens)
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
        request that fails mid-stream (a step error of its own, or shutdown) ends with an
        error event, then [DONE], as vLLM ends one. A client that goes away cancels the
        request (the finally), freeing its blocks."""
        name, num_out = self.model_name, 0
        try:
            if chat:
                yield _sse(p.chat_chunk(rid, name, {"role": "assistant", "content": ""}, None))
            while True:
                event = await stream.events.get()
                if event.finish_reason in ("error", "cancelled"):
                    yield _sse(p.error_body(event.message or "cancelled", None, event.status))
                    yield "data: [DONE]\n\n"
                    return
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
                used = p.usage(len(stream.gen.prompt_token_ids), num_out,
                               stream.num_cached_tokens)
                yield _sse(p.usage_chunk(rid, name, obj, used))
            yield "data: [DONE]\n\n"
        finally:
            self.serving.cancel(stream)
