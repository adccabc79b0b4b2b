"""From a validated body to a Generation: the prompt's token ids and the output length, checked
against the vocabulary and max_model_len with vLLM's messages, before anything is admitted."""

import asyncio

from servecap.ledger.errors import SpecError

from . import protocol as p
from .edge import Refused
from .serving_loop import Generation
from .tokenizer import chat_prompt

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's documented default for /v1/completions
ENCODE_INLINE_CHARS = 64 * 2**10  # longer texts are tokenized in a worker thread


class Admission:
    """What the edge knows of the model: its name, context and vocabulary."""

    def __init__(self, tokenizer, model_name: str, max_model_len: int, vocab_size: int):
        self.tok, self.model_name = tokenizer, model_name
        self.max_model_len, self.vocab_size = max_model_len, vocab_size

    async def encode(self, text: str, param: str) -> list[int]:
        """The text's ids; a long text is encoded in a worker thread, not on the event loop."""
        try:
            if len(text) <= ENCODE_INLINE_CHARS:
                return self.tok.encode(text)
            return await asyncio.to_thread(self.tok.encode, text)
        except SpecError as exc:
            raise Refused(exc.line(), 400, param) from None
        except Exception as exc:  # the tokenizers library raises its own types
            raise Refused(f"{param}: the tokenizer cannot encode this text "
                          f"({type(exc).__name__}: {str(exc)[:80]})", 400, param) from None

    async def completion_ids(self, body: p.CompletionRequest) -> list[int]:
        """One prompt per request: text, token ids, or a one-element list of either."""
        prompt = body.prompt
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
            if len(prompt) != 1:
                raise Refused(f"prompt: {len(prompt)} prompts in one request; this server "
                              "takes one prompt per request", 400, "prompt")
            prompt = prompt[0]
        ids = await self.encode(prompt, "prompt") if isinstance(prompt, str) else list(prompt)
        return self._checked(ids)

    async def chat_ids(self, body: p.ChatRequest) -> list[int]:
        return self._checked(await self.encode(chat_prompt(body.messages), "messages"))

    def too_long(self, num_tokens: int) -> Refused:
        return Refused(f"This model's maximum context length is {self.max_model_len} "
                       f"tokens. However, your request has {num_tokens} input tokens. "
                       "Please reduce the length of the input messages.", 400, "prompt")

    def _checked(self, ids: list[int]) -> list[int]:
        """vLLM's prompt checks (vllm/v1/engine/processor.py, serving_engine.py)."""
        if not ids:
            raise Refused("The decoder prompt cannot be empty", 400, "prompt")
        if len(ids) >= self.max_model_len:  # first: a cheap refusal of a huge prompt
            raise self.too_long(len(ids))
        bad = next((t for t in ids if not 0 <= t < self.vocab_size), None)
        if bad is not None:
            raise Refused(f"Token id {bad} is out of vocabulary (ids are 0 to "
                          f"{self.vocab_size - 1})", 400, "prompt")
        return ids

    def generation(self, body: p.SamplingFields, ids: list[int], chat: bool) -> Generation:
        if body.model != self.model_name:
            raise Refused(f"The model `{body.model}` does not exist; this server serves "
                          f"`{self.model_name}`", 404, "model")
        room = self.max_model_len - len(ids)
        asked = body.max_completion_tokens or body.max_tokens
        if asked is not None and asked > room:
            raise Refused(f"'max_tokens' or 'max_completion_tokens' is too large: {asked}. "
                          f"This model's maximum context length is {self.max_model_len} "
                          f"tokens and your request has {len(ids)} input tokens ({asked} > "
                          f"{self.max_model_len} - {len(ids)}).", 400, "max_tokens")
        max_tokens = asked or (room if chat else min(room, DEFAULT_COMPLETION_MAX_TOKENS))
        if body.min_tokens > max_tokens:
            raise Refused(f"min_tokens must be less than or equal to max_tokens={max_tokens}, "
                          f"got {body.min_tokens}.", 400, "min_tokens")
        temperature = 1.0 if body.temperature is None else body.temperature
        return Generation(tuple(ids), max_tokens, body.min_tokens, body.ignore_eos,
                          temperature, body.seed or 0)
