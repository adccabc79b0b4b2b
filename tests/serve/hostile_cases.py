"""Hostile requests against `servecap serve tiny-llama --max-model-len 2048` (vocab 256), each
with the HTTP status it must get and a phrase its OpenAI error message must carry. Bodies are
bytes, so cases that no JSON library would write (lone surrogates, invalid UTF-8, NaN) are
sent exactly. The soak test draws from this table too."""

import json

M = "tiny-llama"
COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"


def body(**fields) -> bytes:
    return json.dumps({"model": M, **fields}).encode()


def chat(**fields) -> bytes:
    return body(messages=[{"role": "user", "content": "hi"}], **fields)


# (id, method, path, body, status, phrase in error.message)
CASES = [
    # seeds outside 64 bits and temperatures that overflow softmax (they used to fail every
    # stream in flight)
    ("seed 2^64", "POST", COMPLETIONS, body(prompt=[1, 2], seed=2**64), 400, "seed"),
    ("seed -2^63-1", "POST", COMPLETIONS, body(prompt=[1, 2], seed=-(2**63) - 1), 400, "seed"),
    ("temperature 1e-300", "POST", COMPLETIONS, body(prompt=[1], temperature=1e-300), 400,
     "temperature"),
    ("temperature NaN", "POST", COMPLETIONS,
     b'{"model": "tiny-llama", "prompt": [1], "temperature": NaN}', 400, ""),
    ("temperature 1e999", "POST", COMPLETIONS,
     b'{"model": "tiny-llama", "prompt": [1], "temperature": 1e999}', 400, "temperature"),
    ("temperature -1", "POST", COMPLETIONS, body(prompt=[1], temperature=-1), 400,
     "temperature"),
    ("temperature as text", "POST", COMPLETIONS, body(prompt=[1], temperature="0.5"), 400,
     "temperature"),
    # prompts
    ("lone surrogate", "POST", COMPLETIONS,
     b'{"model": "tiny-llama", "prompt": "\\ud800", "max_tokens": 2}', 400, "JSON"),
    ("invalid UTF-8", "POST", COMPLETIONS, b'{"model": "tiny-llama", "prompt": "\xff\xfe"}',
     400, "JSON"),
    ("out-of-vocab id, streamed", "POST", COMPLETIONS,
     body(prompt=[1, 256], max_tokens=2, stream=True), 400, "out of vocabulary"),
    ("negative id", "POST", COMPLETIONS, body(prompt=[-1], max_tokens=2), 400,
     "out of vocabulary"),
    ("id 10^30", "POST", COMPLETIONS, body(prompt=[10**30], max_tokens=2), 400,
     "out of vocabulary"),
    ("empty prompt", "POST", COMPLETIONS, body(prompt=[], max_tokens=2), 400, "empty"),
    ("two prompts", "POST", COMPLETIONS, body(prompt=["a", "b"]), 400, "one prompt"),
    ("prompt a number", "POST", COMPLETIONS, body(prompt=5), 400, "prompt"),
    ("prompt ids as floats", "POST", COMPLETIONS, body(prompt=[1.0, 2.0]), 400, "prompt"),
    ("prompt past max_model_len", "POST", COMPLETIONS, body(prompt=[1] * 2048), 400,
     "your request has 2048 input tokens"),
    ("max_tokens past the context", "POST", COMPLETIONS,
     body(prompt=[1] * 2040, max_tokens=10), 400, "'max_tokens' or 'max_completion_tokens'"),
    # chat
    ("chat part text a number", "POST", CHAT,
     body(messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]), 400, "text"),
    ("chat part text null", "POST", CHAT,
     body(messages=[{"role": "user", "content": [{"type": "text", "text": None}]}]), 400,
     "text"),
    ("chat image part", "POST", CHAT, body(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]), 400, "type"),
    ("chat unknown role", "POST", CHAT, body(messages=[{"role": "root", "content": "x"}]), 400,
     "role"),
    # vLLM's OpenAI message types require a user, system, developer or tool message's
    # content to be a string or parts: null is a 400 there (content left out counts as empty)
    ("chat user content null", "POST", CHAT,
     body(messages=[{"role": "user", "content": None}]), 400, "messages.0.content"),
    ("chat system content null", "POST", CHAT, body(messages=[
        {"role": "system", "content": None}, {"role": "user", "content": "hi"}]), 400,
     "messages.0.content"),
    ("chat no messages", "POST", CHAT, body(messages=[]), 400, "messages"),
    ("chat messages not a list", "POST", CHAT, body(messages="hi"), 400, "messages"),
    ("chat prompt past max_model_len", "POST", CHAT,
     body(messages=[{"role": "user", "content": "x" * 3000}]), 400, "maximum context length"),
    # types are strict and fields are never silently ignored
    ("max_tokens true", "POST", COMPLETIONS, body(prompt=[1], max_tokens=True), 400,
     "max_tokens"),
    ("max_tokens as text", "POST", COMPLETIONS, body(prompt=[1], max_tokens="5"), 400,
     "max_tokens"),
    ("max_tokens 0", "POST", COMPLETIONS, body(prompt=[1], max_tokens=0), 400, "max_tokens"),
    ("max_tokens 2.5", "POST", COMPLETIONS, body(prompt=[1], max_tokens=2.5), 400,
     "max_tokens"),
    ("min_tokens over max_tokens", "POST", COMPLETIONS,
     body(prompt=[1], max_tokens=2, min_tokens=3), 400, "min_tokens"),
    ("stream as text", "POST", COMPLETIONS, body(prompt=[1], stream="yes"), 400, "stream"),
    ("n 2", "POST", COMPLETIONS, body(prompt=[1], n=2), 400, "n"),
    ("stop string", "POST", COMPLETIONS, body(prompt=[1], stop=["\n"]), 400, "stop"),
    ("chat stop string", "POST", CHAT, chat(stop="x"), 400, "stop"),
    ("top_p", "POST", COMPLETIONS, body(prompt=[1], top_p=0.5), 400, "top_p"),
    ("logprobs", "POST", COMPLETIONS, body(prompt=[1], logprobs=5), 400, "logprobs"),
    ("model missing", "POST", COMPLETIONS, b'{"prompt": [1]}', 400, "model"),
    ("another model", "POST", COMPLETIONS,
     b'{"model": "gpt-4", "prompt": [1], "max_tokens": 1}', 404, "does not exist"),
    # bodies that are not a request
    ("not JSON", "POST", COMPLETIONS, b"not json", 400, "JSON"),
    ("a JSON number", "POST", COMPLETIONS, b"5", 400, "object"),
    ("a JSON list", "POST", CHAT, b"[1, 2]", 400, "object"),
    ("empty body", "POST", COMPLETIONS, b"", 400, "JSON"),
    ("truncated JSON", "POST", COMPLETIONS, b'{"model": "tiny-llama", "prompt": [1,', 400,
     "JSON"),
    # routes
    ("unknown route", "GET", "/v1/nothing", b"", 404, "Not found"),
    ("unknown route POST", "POST", "/v2/completions", body(prompt=[1]), 404, "Not found"),
    ("GET on a POST route", "GET", COMPLETIONS, b"", 405, "not allowed"),
    ("DELETE models", "DELETE", "/v1/models", b"", 405, "not allowed"),
]
