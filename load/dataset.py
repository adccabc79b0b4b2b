"""--dataset FILE: JSONL conversations in the common shapes, one per line.

- ShareGPT: {"conversations": [{"from": "human"|"gpt"|"system", "value": TEXT}, ...]}
- a prompt: {"prompt": TEXT, "output_tokens": N}
- OpenAI messages: {"messages": [{"role": "system"|"user"|"assistant", "content": ...}, ...]}

Each user message is a turn; an assistant message after it is that turn's reference answer
(its token count is the turn's output length when no output_tokens / max_tokens is given).
A leading system message is the conversation's system prompt.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from servecap.ledger.errors import SpecError

USER, ASSISTANT, SYSTEM = "user", "assistant", "system"
ROLES = {"human": USER, "user": USER, "gpt": ASSISTANT, "assistant": ASSISTANT, "chatgpt":
         ASSISTANT, "bard": ASSISTANT, "bing": ASSISTANT, "model": ASSISTANT, "system": SYSTEM}
SHAPES = ('one JSON object a line: {"conversations": [{"from", "value"}]} (ShareGPT), '
          '{"prompt", "output_tokens"} or {"messages": [{"role", "content"}]}')


@dataclass(frozen=True)
class Turn:
    text: str
    output_tokens: int | None = None  # the row's, else counted from the reference answer
    reference: str | None = None  # the dataset's answer to this turn


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Turn, ...]
    system: str | None = None


def read_dataset(path: Path) -> list[Conversation]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError("--dataset", str(path), f"a readable UTF-8 JSONL file ({exc})") from None
    out = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(_conversation(line))
            except SpecError as exc:
                raise exc.at(f"{path} line {number}") from None
    if not out:
        raise SpecError("--dataset", str(path), f"has no conversation; {SHAPES}")
    return out


def _conversation(line: str) -> Conversation:
    try:
        row = json.loads(line)
    except ValueError:
        raise SpecError("line", line[:60], SHAPES) from None
    if not isinstance(row, dict):
        raise SpecError("line", line[:60], SHAPES)
    length = _length(row)
    if "prompt" in row:
        return Conversation((Turn(_text(row["prompt"], "prompt"), length),))
    if "conversations" in row:
        messages = [(_role(m, "from"), _text(_get(m, "value"), "value"))
                    for m in _list(row, "conversations")]
    elif "messages" in row:
        messages = [(_role(m, "role"), _text(_get(m, "content"), "content"))
                    for m in _list(row, "messages")]
    else:
        raise SpecError("line", sorted(row)[:6], SHAPES)
    return _turns(messages, length)


def _turns(messages: list[tuple[str, str]], length: int | None) -> Conversation:
    system = messages[0][1] if messages and messages[0][0] == SYSTEM else None
    turns: list[Turn] = []
    for role, text in messages[1 if system is not None else 0:]:
        if role == USER:
            turns.append(Turn(text, length))
        elif role == ASSISTANT and turns and turns[-1].reference is None:
            turns[-1] = Turn(turns[-1].text, length, text)
        elif role == ASSISTANT and not turns:
            continue  # an opening greeting: nothing was asked yet
        else:
            raise SpecError("role", role, "system first, then user turns each answered by at "
                            "most one assistant message")
    if not turns:
        raise SpecError("messages", len(messages), "at least one user (human) message")
    return Conversation(tuple(turns), system)


def _length(row: dict) -> int | None:
    for key in ("output_tokens", "max_tokens"):
        value = row.get(key)
        if value is not None:
            if type(value) is not int or value < 1:
                raise SpecError(key, value, "a whole number of tokens >= 1")
            return value
    return None


def _list(row: dict, key: str) -> list:
    value = row[key]
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise SpecError(key, value, "a list of message objects")
    return value


def _get(message: dict, key: str):
    if key not in message:
        raise SpecError(key, None, f"each message needs {key!r}")
    return message[key]


def _role(message: dict, key: str) -> str:
    role = _get(message, key)
    if role not in ROLES:
        raise SpecError(key, role, f"one of {', '.join(sorted(ROLES))}")
    return ROLES[role]


def _text(value, key: str) -> str:
    """Text, or OpenAI content parts [{"type": "text", "text": ...}] joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                       and isinstance(p.get("text"), str) for p in value):
        return "".join(p["text"] for p in value)
    raise SpecError(key, value, "text, or a list of {\"type\": \"text\", \"text\": ...} parts")
