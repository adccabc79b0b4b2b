"""Text <-> token ids for the server: the model's tokenizer.json, or a byte-level stand-in."""

import json
from pathlib import Path

from servecap.ledger.chat import plain_chat_prompt
from servecap.ledger.errors import SpecError


class ByteTokenizer:
    """The stand-in when a model ships no tokenizer.json: each UTF-8 byte is one token id
    (needs vocab_size >= 256). Seeded random weights have no vocabulary of their own, so the
    text is only a carrier; token-id prompts are the exact interface."""

    name = "byte-level stand-in (one token per UTF-8 byte)"
    eos_token_ids: tuple[int, ...] = ()

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        if self.vocab_size < 256:
            raise SpecError("prompt", text[:40], f"text prompts need a tokenizer; this model has "
                            f"{self.vocab_size} token ids and no tokenizer.json: send token ids")
        return list(text.encode("utf-8"))

    def decode(self, token_ids: list[int]) -> str:
        return bytes(t for t in token_ids if t < 256).decode("utf-8", errors="replace")


class FileTokenizer:
    """A Hugging Face tokenizer.json read with the `tokenizers` package; EOS ids from the
    directory's generation_config.json or config.json (eos_token_id)."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SpecError("tokenizer", str(path), "needs the `tokenizers` package: "
                            "pip install tokenizers") from None
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises its own exception types
            raise SpecError("tokenizer", str(path), f"not a readable tokenizer.json ({exc})"
                            ) from None
        self.name = str(path)
        self.eos_token_ids = _eos_ids(path.parent)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def decode(self, token_ids: list[int]) -> str:
        return self._tok.decode(token_ids)


def _eos_ids(folder: Path) -> tuple[int, ...]:
    for name in ("generation_config.json", "config.json"):
        try:
            value = json.loads((folder / name).read_text()).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        if value is not None:
            return tuple(value) if isinstance(value, list) else (int(value),)
    return ()


def load_tokenizer(folders: list[Path], vocab_size: int) -> ByteTokenizer | FileTokenizer:
    """The first tokenizer.json among the folders (the model directory, the weights
    directory), else the byte-level stand-in."""
    for folder in folders:
        path = folder if folder.is_file() else folder / "tokenizer.json"
        if path.is_file():
            return FileTokenizer(path)
    return ByteTokenizer(vocab_size)


def chat_prompt(messages) -> str:
    """ledger.chat's plain role-tagged transcript ending in the assistant's turn. servecap
    does not run Jinja chat templates, so chat prompts are this template for every model.
    messages are protocol.Message: content is text, a list of text parts, or none."""
    return plain_chat_prompt([(m.role, _content(m.content)) for m in messages])


def _content(content) -> str:
    if isinstance(content, list):
        return "".join(part.text for part in content)
    return content or ""
