"""One streamed completion against an OpenAI-compatible endpoint, timed token by token.

The prompt is token ids (the completions endpoint takes them, as vLLM does) and the output
length is exact: max_tokens = min_tokens = the requested count and ignore_eos (vLLM's
extensions). Every SSE chunk carrying text is one token arrival; the final usage chunk
(stream_options.include_usage) gives the token count when the server sends it.
"""

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

OK, HTTP_ERROR, TIMEOUT, CONNECTION_ERROR, STREAM_ERROR = (
    "ok", "http_error", "timeout", "connection_error", "stream_error")


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


def request_body(model: str, prompt_ids: list[int], output_tokens: int) -> dict:
    return {"model": model, "prompt": prompt_ids, "max_tokens": output_tokens,
            "min_tokens": output_tokens, "ignore_eos": True, "temperature": 0.0,
            "stream": True, "stream_options": {"include_usage": True}}


async def stream_completion(session: aiohttp.ClientSession, url: str, body: dict,
                            timeout_s: float) -> Outcome:
    out = Outcome(sent_s=time.perf_counter())
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, json=body) as resp:
                out.http_status = resp.status
                if resp.status != 200:
                    text = (await resp.text())[:200]
                    return _failed(out, HTTP_ERROR, f"HTTP {resp.status}: {text}")
                await _read_events(resp, out)
    except TimeoutError:
        return _failed(out, TIMEOUT, f"no complete answer within {timeout_s:g} s")
    except aiohttp.ClientError as exc:
        return _failed(out, CONNECTION_ERROR, f"{type(exc).__name__}: {exc}")
    return out


async def _read_events(resp: aiohttp.ClientResponse, out: Outcome) -> None:
    """Split the body on blank lines; each `data:` event is a chunk, `[DONE]` ends it."""
    buffer, usage = b"", None
    async for piece in resp.content.iter_any():
        now = time.perf_counter()
        buffer += piece.replace(b"\r\n", b"\n") if b"\r" in piece else piece
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            if not event.startswith(b"data: "):
                continue
            payload = event[6:]
            if payload == b"[DONE]":
                return _finish(out, usage, now)
            chunk = json.loads(payload)
            if "error" in chunk:
                return _stream_error(out, chunk["error"])
            usage = chunk.get("usage") or usage
            if _carries_token(chunk):
                out.token_s.append(now)
    _failed(out, STREAM_ERROR, "the stream ended without data: [DONE]")


def _carries_token(chunk: dict) -> bool:
    """A choice with text (completions) or content (chat); a chat role-only opener is not."""
    choices = chunk.get("choices") or ()
    if not choices:
        return False
    choice = choices[0]
    if "text" in choice:
        return bool(choice["text"]) or choice.get("finish_reason") is None
    delta = choice.get("delta") or {}
    return bool(delta.get("content"))


def _finish(out: Outcome, usage: dict | None, now: float) -> None:
    out.done_s = now
    out.num_output_tokens = usage["completion_tokens"] if usage else len(out.token_s)


def _stream_error(out: Outcome, error) -> None:
    message = error.get("message", error) if isinstance(error, dict) else error
    _failed(out, STREAM_ERROR, str(message)[:200])


def _failed(out: Outcome, status: str, detail: str) -> Outcome:
    out.status, out.detail, out.done_s = status, detail, time.perf_counter()
    return out
