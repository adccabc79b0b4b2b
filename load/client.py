"""One streamed completion against an OpenAI-compatible endpoint, timed token by token.

The body (load/prompts.py) asks for an exact output length: max_tokens = min_tokens = the
requested count and ignore_eos (vLLM's extensions). Every SSE chunk carrying text is one
token arrival; the final usage chunk (stream_options.include_usage) gives the token counts
(and the prefix cache's cached_tokens) when the server sends them.

A response that breaks the protocol is never an exception out of here: it is an Outcome of
one named kind (load/errors.py), so one bad answer among many loses only itself.
"""

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

from .errors import (
    BAD_ENCODING,
    BAD_JSON,
    BAD_RESPONSE,
    BAD_SCHEMA,
    BAD_SSE,
    CONNECTION_ERROR,
    HTTP_ERROR,
    MAX_EVENT_BYTES,
    OK,
    STREAM_ERROR,
    TIMEOUT,
    Malformed,
    short,
)


@dataclass
class Outcome:
    """One request's result; times are perf_counter seconds."""

    status: str = OK
    detail: str = ""
    http_status: int | None = None
    sent_s: float = 0.0
    token_s: list[float] = field(default_factory=list)
    num_output_tokens: int = 0  # usage.completion_tokens, else the chunks counted
    done_s: float | None = None
    text: str = ""  # the answer as streamed
    num_prompt_tokens: int | None = None  # usage.prompt_tokens, when sent
    num_cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, when sent


async def stream_completion(session: aiohttp.ClientSession, url: str, body: dict,
                            timeout_s: float) -> Outcome:
    out = Outcome(sent_s=time.perf_counter())
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, json=body) as resp:
                out.http_status = resp.status
                if resp.status != 200:
                    text = (await resp.content.read(4096)).decode("utf-8", "replace")
                    return _failed(out, HTTP_ERROR, f"HTTP {resp.status}: {short(text)}")
                await _read_events(resp, out)
    except TimeoutError:
        return _failed(out, TIMEOUT, f"no complete answer within {timeout_s:g} s")
    except Malformed as exc:
        return _failed(out, exc.kind, exc.detail)
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError) as exc:
        return _failed(out, CONNECTION_ERROR, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # aiohttp's refusal of what is not HTTP, and anything unforeseen
        return _failed(out, BAD_RESPONSE, f"{type(exc).__name__}: {exc}")
    return out


async def _read_events(resp: aiohttp.ClientResponse, out: Outcome) -> None:
    """Split the body on blank lines; each `data:` event is a chunk, `[DONE]` ends it."""
    buffer, usage, texts = b"", None, []
    async for piece in resp.content.iter_any():
        now = time.perf_counter()
        buffer += piece.replace(b"\r\n", b"\n") if b"\r" in piece else piece
        *events, buffer = buffer.split(b"\n\n")
        if len(buffer) > MAX_EVENT_BYTES:
            raise Malformed(BAD_SSE, f"an event of over {MAX_EVENT_BYTES:,} bytes without a "
                            "blank line: not server-sent events")
        for event in events:
            if not event.startswith(b"data: "):
                continue
            payload = event[6:]
            if payload == b"[DONE]":
                out.text = "".join(texts)
                return _finish(out, usage, now)
            chunk = decode_chunk(payload)
            if "error" in chunk:
                return _stream_error(out, chunk["error"])
            usage = chunk_usage(chunk) or usage
            if carries_token(chunk):
                out.token_s.append(now)
                texts.append(chunk_text(chunk))
    _failed(out, STREAM_ERROR, "the stream ended without data: [DONE]")


def decode_chunk(payload: bytes) -> dict:
    """A `data:` payload as a JSON object, or Malformed naming what it is instead."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(BAD_ENCODING, f"a data: event is not UTF-8 ({exc.reason} at byte "
                        f"{exc.start})") from None
    try:
        chunk = json.loads(text)
    except ValueError:
        raise Malformed(BAD_JSON, f"a data: event is not JSON: {text}") from None
    if not isinstance(chunk, dict):
        raise Malformed(BAD_SCHEMA, f"a data: event is {type(chunk).__name__}, not an "
                        f"object: {text}")
    return chunk


def chunk_usage(chunk: dict) -> dict | None:
    """usage, when the chunk has one: an object with a whole completion_tokens >= 0."""
    usage = chunk.get("usage")
    if usage is None:
        return None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if type(tokens) is not int or tokens < 0:
        raise Malformed(BAD_SCHEMA, f"usage without a whole completion_tokens: {usage}")
    return usage


def carries_token(chunk: dict) -> bool:
    """A choice with text (completions) or content (chat); a chat role-only opener is not."""
    choices = chunk.get("choices")
    if choices is None or choices == []:
        return False
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise Malformed(BAD_SCHEMA, f"choices is not a list of objects: {choices}")
    choice = choices[0]
    if "text" in choice:
        if not isinstance(choice["text"], str | None):
            raise Malformed(BAD_SCHEMA, f"choices[0].text is not text: {choice['text']}")
        return bool(choice["text"]) or choice.get("finish_reason") is None
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        raise Malformed(BAD_SCHEMA, f"choices[0].delta is not an object: {delta}")
    return bool(delta.get("content"))


def chunk_text(chunk: dict) -> str:
    """The text a chunk that carries_token carries."""
    choice = chunk["choices"][0]
    return choice.get("text") or (choice.get("delta") or {}).get("content") or ""


def _finish(out: Outcome, usage: dict | None, now: float) -> None:
    out.done_s = now
    out.num_output_tokens = usage["completion_tokens"] if usage else len(out.token_s)
    if usage:
        out.num_prompt_tokens = _whole(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        out.num_cached_tokens = _whole(details.get("cached_tokens")) \
            if isinstance(details, dict) else None


def _whole(value) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _stream_error(out: Outcome, error) -> None:
    message = error.get("message", error) if isinstance(error, dict) else error
    _failed(out, STREAM_ERROR, short(str(message)))


def _failed(out: Outcome, status: str, detail: str) -> Outcome:
    out.status, out.detail, out.done_s = status, short(detail), time.perf_counter()
    return out
