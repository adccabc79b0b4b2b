"""The OpenAI request bodies the server accepts (pydantic at the edge, strict types, vLLM's
ranges), the fields it refuses rather than ignore, and its JSON replies."""

import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

# vLLM's ranges (vllm/entrypoints/openai/protocol.py, vllm/sampling_params.py)
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1  # torch.long, as vLLM bounds `seed`
# vLLM raises 0 < T < 0.01 to 0.01 (its _MAX_TEMP) because softmax(logits / T) overflows below
# it; servecap refuses such a temperature instead of silently changing it
MIN_TEMPERATURE = 0.01

Strict = ConfigDict(strict=True, extra="allow")  # "1" is not 1, true is not 1


class StreamOptions(BaseModel):
    model_config = Strict
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class TextPart(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    type: Literal["text"]
    text: str


class Message(BaseModel):
    """vLLM's chat message (vllm/entrypoints/chat_utils.py): content left out counts as empty
    (its CustomChatCompletionMessageParam makes content optional, and
    _parse_chat_message_content reads None as no parts); content null is an assistant
    message's only (OpenAI's assistant message, which may carry tool_calls instead), and a
    400 for any other role, whose message types require a string or parts."""

    model_config = ConfigDict(strict=True, extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    @field_validator("content")
    @classmethod
    def _null_only_for_the_assistant(cls, content, info: ValidationInfo):
        role = info.data.get("role")
        if content is None and role is not None and role != "assistant":
            raise ValueError(f"null content in a {role} message: give a string or a list of "
                             "text parts (null is an assistant message's only)")
        return content


# Fields OpenAI or vLLM define that this server does not implement: refused with 400 when
# given a value other than the one that changes nothing (a client never gets a silently
# different answer). Other unknown fields are ignored, as vLLM ignores them.
UNSUPPORTED = {
    "stop": ("", []), "stop_token_ids": ([],), "top_p": (1, 1.0), "top_k": (-1, 0),
    "min_p": (0, 0.0), "frequency_penalty": (0, 0.0), "presence_penalty": (0, 0.0),
    "repetition_penalty": (1, 1.0), "logit_bias": ({},), "logprobs": (False, 0),
    "top_logprobs": (0,), "prompt_logprobs": (0,), "best_of": (1,), "echo": (False,),
    "suffix": ("",), "use_beam_search": (False,), "tools": ([],),
    "response_format": ({"type": "text"},), "guided_json": (), "guided_regex": (),
    "guided_choice": (), "guided_grammar": (), "structured_outputs": (), "bad_words": ([],),
    "allowed_token_ids": (), "include_stop_str_in_output": (False,),
}


class SamplingFields(BaseModel):
    """Fields both endpoints share; vLLM's extensions ignore_eos and min_tokens included."""

    model_config = Strict
    model: str
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    min_tokens: int = Field(0, ge=0)
    ignore_eos: bool = False
    temperature: float | None = Field(None, ge=0, allow_inf_nan=False)
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX)
    n: int = Field(1, ge=1, le=1, description="one choice per request")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class CompletionRequest(SamplingFields):
    """prompt: text, token ids (as vLLM accepts them), or a one-element list of either."""

    prompt: str | list[int] | list[str] | list[list[int]]


class ChatRequest(SamplingFields):
    messages: list[Message] = Field(min_length=1)


class Invalid(ValueError):
    """A request body the edge refuses: one line naming the field, the value and the rule."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message, param)  # both in args: it crosses a process boundary
        self.message, self.param = message, param

    def __str__(self) -> str:
        return self.message


class TooLong(Invalid):
    """A token-id prompt of num_tokens, found past max_model_len before it was sent back
    from the parsing process (admit.py words the refusal)."""

    def __init__(self, num_tokens: int) -> None:
        super().__init__(f"{num_tokens} prompt tokens", "prompt")
        self.num_tokens = num_tokens
        self.args = (num_tokens,)


def parse(model: type[SamplingFields], body: bytes) -> SamplingFields:
    """The body as `model`, or Invalid naming the first bad field (JSON syntax, invalid UTF-8
    and lone surrogates included: pydantic's JSON parser refuses them)."""
    try:
        request = model.model_validate_json(body)
    except ValidationError as exc:
        raise Invalid(*_first(exc)) from None
    check_sampling(request)
    return request


def parse_bounded(model: type[SamplingFields], body: bytes, max_prompt_tokens: int
                  ) -> SamplingFields:
    """parse, and a token-id prompt of max_prompt_tokens or more is TooLong: the parsing
    process never sends millions of ids back to be refused."""
    request = parse(model, body)
    prompt = getattr(request, "prompt", None)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int) and \
            len(prompt) >= max_prompt_tokens:
        raise TooLong(len(prompt))
    return request


def _first(exc: ValidationError) -> tuple[str, str | None]:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(x) for x in error.get("loc", ()))
    value = "" if error["type"] in ("missing", "json_invalid") else \
        f" (got {str(error.get('input'))[:60]!r})"
    return (f"{where}: {error['msg']}{value}" if where else error["msg"]), where or None


def check_sampling(request: SamplingFields) -> None:
    """Ranges a field's type cannot say, and the fields this server refuses."""
    temp = request.temperature
    if temp is not None and 0 < temp < MIN_TEMPERATURE:
        raise Invalid(f"temperature = {temp!r}: must be 0 (greedy) or >= {MIN_TEMPERATURE} "
                      "(below it softmax(logits / T) overflows)", "temperature")
    for name, value in (request.model_extra or {}).items():
        if name in UNSUPPORTED and not _harmless(value, UNSUPPORTED[name]):
            raise Invalid(f"{name} = {str(value)[:60]!r}: not supported by this server "
                          "(leave it unset)", name)


def _harmless(value, allowed: tuple) -> bool:
    return value is None or any(value == a and type(value) is type(a) for a in allowed)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(num_prompt: int, num_output: int, num_cached: int = 0) -> dict:
    """OpenAI's usage object; prompt_tokens_details.cached_tokens is the prompt tokens the
    prefix cache served (vLLM sends it with --enable-prompt-tokens-details; servecap always)."""
    return {"prompt_tokens": num_prompt, "completion_tokens": num_output,
            "total_tokens": num_prompt + num_output,
            "prompt_tokens_details": {"cached_tokens": num_cached}}


def completion_chunk(rid: str, model: str, text: str, finish: str | None) -> dict:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}


def chat_chunk(rid: str, model: str, delta: dict, finish: str | None) -> dict:
    return {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


def usage_chunk(rid: str, model: str, obj: str, used: dict) -> dict:
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model,
            "choices": [], "usage": used}


def completion_body(rid: str, model: str, text: str, finish: str, used: dict) -> dict:
    return completion_chunk(rid, model, text, finish) | {"usage": used}


def chat_body(rid: str, model: str, text: str, finish: str, used: dict) -> dict:
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": finish}], "usage": used}


ERROR_TYPES = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError",
               405: "MethodNotAllowed", 408: "RequestTimeout", 413: "RequestTooLarge",
               429: "TooManyRequests", 500: "InternalServerError", 503: "ServiceUnavailable"}


def error_body(message: str, kind: str | None, code: int, param: str | None = None) -> dict:
    """OpenAI's error object, as vLLM sends it: {"error": {message, type, param, code}}."""
    return {"error": {"message": message, "type": kind or ERROR_TYPES.get(code, "Error"),
                      "param": param, "code": code}}
