"""What each turn of a conversation sends: token ids, text, or chat messages, with the history.

Three kinds of prompt, by endpoint and what is given:
- ids (completions, no tokenizer, no dataset): token ids of each request's length; a later
  turn sends the history's ids, the previous answer stood in by seeded ids of its length
  (a completions server answers with text, not ids), then the turn's own ids;
- text (completions with a dataset or a tokenizer): the history as one text, each answer as
  the server wrote it;
- chat (chat/completions): the history as messages, each answer an assistant message.
Text a dataset does not give is made up: seeded words of the request's length (a tokenizer
is needed to cut them). With a tokenizer each prompt's tokens are counted as the server
counts them: the text itself for completions; for chat the plain template `servecap serve`
applies (ledger/chat.py), so a server running the model's own chat template counts more.
"""

from dataclasses import dataclass, field

from servecap.ledger.chat import plain_chat_prompt
from servecap.sim.sampling import Request

from .synth import prompt_ids, stand_in_ids, words_text

COMPLETIONS, CHAT = "completions", "chat"
ENDPOINTS = (COMPLETIONS, CHAT)


@dataclass(frozen=True)
class Planned:
    """One conversation as the run sends it: its turns' requests (ids, lengths; the first's
    arrival is the conversation's) and the user texts (None: made up from the lengths)."""

    requests: tuple[Request, ...]
    texts: tuple[str | None, ...] = ()
    system: str | None = None

    def text(self, turn: int) -> str | None:
        return self.texts[turn] if turn < len(self.texts) else None


@dataclass
class History:
    ids: list[int] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class Prompter:
    endpoint: str
    model: str
    tokenizer: object = None  # load.tokenize.TextTokenizer
    vocab_size: int = 256
    seed: int = 0
    uses_ids: bool = True

    def body(self, conv: Planned, turn: int, history: History) -> tuple[dict, int | None]:
        """The request body of this turn (the history grows by its prompt) and the prompt's
        token count as the client counts it (None: no tokenizer to count text with)."""
        req = conv.requests[turn]
        out = {"max_tokens": req.output_tokens, "min_tokens": req.output_tokens}
        if self.uses_ids:
            history.ids += prompt_ids(req if turn == 0 else _no_prefix(req), self.vocab_size,
                                      self.seed)
            return _body(self.model, {"prompt": list(history.ids)} | out), len(history.ids)
        user = conv.text(turn)
        if turn == 0:
            system = self._system(conv)
            history.messages = [("system", system)] if system else []
        if user is None:
            user = self._words(req, turn, history)
        history.messages.append(("user", user))
        if self.endpoint == CHAT:
            messages = [{"role": r, "content": t} for r, t in history.messages]
            return _body(self.model, {"messages": messages} | out), \
                self._count(plain_chat_prompt(history.messages))
        history.text = self._render(history.messages) if turn == 0 else \
            f"{history.text}\n{user}"
        return _body(self.model, {"prompt": history.text} | out), self._count(history.text)

    def answered(self, conv: Planned, turn: int, history: History, text: str,
                 num_tokens: int) -> None:
        """The answer joins the history the next turn sends."""
        if self.uses_ids:
            req = conv.requests[turn]
            history.ids += stand_in_ids(f"{self.seed}:{req.request_id}", num_tokens,
                                        self.vocab_size)
        else:
            history.messages.append(("assistant", text))
            history.text += text

    def _system(self, conv: Planned) -> str | None:
        req = conv.requests[0]
        shared = words_text(self.tokenizer, req.prefix_tokens, f"{self.seed}:prefix:"
                            f"{req.prefix_group}") if req.prefix_tokens else ""
        return "\n".join(p for p in (shared, conv.system) if p) or None

    def _words(self, req: Request, turn: int, history: History) -> str:
        """Made-up user text: the first turn's whole prompt hits the request's length (the
        template's and the system prompt's tokens subtracted); a later turn adds the
        request's prompt length of new text on top of the history."""
        if turn:
            return words_text(self.tokenizer, req.prompt_tokens, f"{self.seed}:{req.request_id}")
        empty = self._render(history.messages + [("user", "")])
        return words_text(self.tokenizer, req.prompt_tokens - self.tokenizer.count(empty),
                          f"{self.seed}:{req.request_id}")

    def _render(self, messages: list[tuple[str, str]]) -> str:
        if self.endpoint == CHAT:
            return plain_chat_prompt(messages)
        return "\n".join(t for _, t in messages if t)

    def _count(self, text: str) -> int | None:
        return None if self.tokenizer is None else self.tokenizer.count(text)


def _no_prefix(req: Request) -> Request:
    """A later turn's own ids: the shared prefix was the first turn's."""
    from dataclasses import replace

    return replace(req, prefix_group=None, prefix_tokens=0)


def _body(model: str, fields: dict) -> dict:
    return {"model": model, **fields, "ignore_eos": True, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}
