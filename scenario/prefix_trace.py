"""A traffic sample for prefix-cache analysis: JSON Lines, one request per line.

Each line is an object with the prompt as token ids, `prompt_token_ids` (vLLM's name in a
TokensPrompt), or as text, `prompt` (tokenized with the tokenizer given); optional
`arrival_s` (seconds, finite, >= 0), `output_tokens` (whole number >= 1) and `cache_salt`
(vLLM's per-request salt: requests of different salts share no cached block). Blank lines
are skipped. Every error names the file, line and field."""

import json
import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.ledger.prefix_cache import Prompt, Reuse, reuse
from servecap.sim.sampling import Request

TOKEN_LIMIT = 2**63  # ids are held as 8-byte integers: 8 bytes a token for a large trace
MAX_REQUESTS = 1_000_000  # the simulator's own limit on a run (sim/workload.py)
TOKEN_FIELD, TEXT_FIELD = "prompt_token_ids", "prompt"
KNOWN = (TOKEN_FIELD, TEXT_FIELD, "arrival_s", "output_tokens", "cache_salt")
NO_TOKENIZER = ("text needs a tokenizer: give --tokenizer (a folder with tokenizer.json; "
                "pip install tokenizers) or write the prompt as prompt_token_ids")


@dataclass(frozen=True)
class TraceRequest:
    """One line: its prompt (token ids and salt), and arrival / output when given."""

    line: int
    prompt: Prompt
    arrival_s: float | None = None
    output_tokens: int | None = None


def read_trace(path: Path, encode: Callable[[str], list[int]] | None = None,
               progress: Callable[[int], None] | None = None) -> list[TraceRequest]:
    """The file's requests in file order; progress (if given) is told the bytes read after
    each line. SpecError names the file, line and field of the first bad value."""
    try:
        with path.open("rb") as handle:
            return parse_lines(_decoded(handle, path), encode, progress)
    except SpecError as exc:
        raise exc.at(str(path)) from None
    except OSError as exc:
        raise SpecError("trace", str(path), f"cannot be read ({exc.strerror or exc})"
                        ) from None


def _decoded(handle, path: Path) -> Iterable[tuple[str, int]]:
    for number, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8"), len(raw)
        except UnicodeDecodeError:
            raise SpecError(f"line {number}", raw[:40].decode("utf-8", "replace"),
                            "not UTF-8 text: a trace is JSON Lines") from None


def parse_lines(lines: Iterable[tuple[str, int]] | Iterable[str],
                encode: Callable[[str], list[int]] | None = None,
                progress: Callable[[int], None] | None = None) -> list[TraceRequest]:
    out: list[TraceRequest] = []
    for number, item in enumerate(lines, start=1):
        text, size = item if isinstance(item, tuple) else (item, len(item))
        if progress is not None:
            progress(size)
        if not text.strip():
            continue
        if len(out) == MAX_REQUESTS:
            raise SpecError(f"line {number}", f"more than {MAX_REQUESTS:,} requests",
                            "split the trace")
        out.append(_request(text, number, encode))
    if not out:
        raise SpecError("requests", 0, "a trace needs at least one JSON line with "
                        f"{TOKEN_FIELD} or {TEXT_FIELD}")
    return out


def _request(text: str, line: int, encode) -> TraceRequest:
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"line {line}", text.strip()[:40],
                        f"not a JSON object ({exc.msg}, column {exc.colno})") from None
    if not isinstance(row, dict):
        raise SpecError(f"line {line}", text.strip()[:40], "a JSON object per line")
    where = f"line {line}, "
    tokens = _tokens(row, where, encode)
    salt = row.get("cache_salt", "")
    if not isinstance(salt, str):
        raise SpecError(where + "cache_salt", salt, "a string")
    return TraceRequest(line, Prompt(tokens, salt), _arrival(row, where),
                        _whole(row, "output_tokens", where))


def _tokens(row: dict, where: str, encode) -> array:
    if TOKEN_FIELD in row:
        ids = row[TOKEN_FIELD]
        if not isinstance(ids, list) or not ids or not all(
                type(t) is int and 0 <= t < TOKEN_LIMIT for t in ids):
            raise SpecError(where + TOKEN_FIELD, ids, "a non-empty list of token ids "
                            "(whole numbers >= 0 and < 2^63)")
        return array("q", ids)
    if TEXT_FIELD in row:
        prompt = row[TEXT_FIELD]
        if not isinstance(prompt, str) or not prompt:
            raise SpecError(where + TEXT_FIELD, prompt, "a non-empty string")
        if encode is None:
            raise SpecError(where + TEXT_FIELD, prompt[:30], NO_TOKENIZER)
        try:
            ids = encode(prompt)
        except SpecError as exc:
            raise SpecError(where + TEXT_FIELD + f" ({exc.field})", exc.value, exc.allowed
                            ) from None
        if not ids:
            raise SpecError(where + TEXT_FIELD, prompt[:30], "tokenizes to no tokens")
        return array("q", ids)
    raise SpecError(where + TOKEN_FIELD, None, f"each line needs {TOKEN_FIELD} (token ids) "
                    f"or {TEXT_FIELD} (text); fields read: {', '.join(KNOWN)}")


def _arrival(row: dict, where: str) -> float | None:
    value = row.get("arrival_s")
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise SpecError(where + "arrival_s", value, "seconds, a finite number >= 0")
    return float(value)


def _whole(row: dict, name: str, where: str) -> int | None:
    value = row.get(name)
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise SpecError(where + name, value, "a whole number >= 1")
    return value


def sim_requests(trace: list[TraceRequest], found: Reuse, arrivals: list[float],
                 outputs: list[int]) -> list[Request]:
    """The simulator's requests, sorted by arrival: each with one shared prefix, its group's
    (its deepest full block another request shares; the simulator holds one prefix per
    request, so a prefix nested inside a deeper group's is reused only within that group)."""
    out = []
    for i, r in enumerate(trace):
        g = found.per_request_group[i]
        group = None if g is None else f"g{g + 1}"
        tokens = 0 if g is None else found.groups[g].prefix_tokens
        out.append(Request(i, arrivals[i], len(r.prompt.tokens), outputs[i], group, tokens))
    out.sort(key=lambda r: r.arrival_s)
    return [Request(i, r.arrival_s, r.prompt_tokens, r.output_tokens, r.prefix_group,
                    r.prefix_tokens) for i, r in enumerate(out)]


def replayed(trace: list[TraceRequest], block_size: int) -> list[Request]:
    """A token-id trace as `simulate --trace` replays it: every line needs arrival_s and
    output_tokens; prefix groups found at the run's block size."""
    for r in trace:
        for name in ("arrival_s", "output_tokens"):
            if getattr(r, name) is None:
                raise SpecError(f"line {r.line}, {name}", None, "simulate replays a JSON "
                                "Lines trace: each line needs arrival_s and output_tokens")
    found = reuse([r.prompt for r in trace], block_size)
    return sim_requests(trace, found, [r.arrival_s for r in trace],
                        [r.output_tokens for r in trace])
