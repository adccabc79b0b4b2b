"""--tokenizer: a Hugging Face tokenizer.json (a folder, the file, or a Hub id found offline
in the Hub cache) read with the `tokenizers` package, to count prompt tokens as the server
does and to write synthetic text of a given token length."""

from pathlib import Path

from servecap.ledger.errors import SpecError

FIELD = "--tokenizer"
ALLOWED = ("a folder with tokenizer.json, a tokenizer.json, or a Hub id already in the Hub "
           "cache (hf download ID tokenizer.json)")


class TextTokenizer:
    """Token ids of a text, with the special tokens the tokenizer adds (BOS), as a server
    encoding the same text counts them."""

    def __init__(self, path: Path, name: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SpecError(FIELD, name, "needs the `tokenizers` package: pip install "
                            "'servecap[serve]'") from None
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises its own exception types
            raise SpecError(FIELD, name, f"not a readable tokenizer.json ({str(exc)[:120]})"
                            ) from None
        self.name = name

    def count(self, text: str) -> int:
        return len(self._tok.encode(text).ids)

    def ids(self, text: str) -> list[int]:
        """The token ids a server computes for text (BOS included where the tokenizer adds
        it)."""
        return self._tok.encode(text).ids

    def cut(self, text: str, num_tokens: int) -> str:
        """The longest leading part of text whose own tokens (specials aside) number at
        most num_tokens, cut at a token's end."""
        enc = self._tok.encode(text)
        ends = [end for (_, end), special in zip(enc.offsets, enc.special_tokens_mask,
                                                  strict=True) if not special]
        if num_tokens <= 0 or not ends:
            return ""
        return text[:ends[min(num_tokens, len(ends)) - 1]]


def load_tokenizer(spec: str) -> TextTokenizer:
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
        if not path.is_file():
            raise SpecError(FIELD, spec, f"has no tokenizer.json; {ALLOWED}")
        return TextTokenizer(path, spec)
    if path.is_file():
        return TextTokenizer(path, spec)
    cached = _hub_cached(spec)
    if cached is None:
        raise SpecError(FIELD, spec, ALLOWED)
    return TextTokenizer(cached, spec)


def _hub_cached(repo_id: str) -> Path | None:
    """The Hub cache's tokenizer.json of repo_id, never the network."""
    if repo_id.count("/") > 1 or repo_id.startswith(("/", ".", "~")):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "tokenizer.json")
    except Exception:  # an id the Hub's rules refuse
        return None
    return Path(found) if isinstance(found, str) else None
