"""Reading untrusted input files: regular files of bounded size, YAML without aliases, JSON and
YAML nested to a bounded depth, numbers of a size arithmetic can hold."""

import json
import math
import os
import stat
from pathlib import Path

import yaml

from servecap.ledger.errors import SpecError

MAX_INPUT_BYTES = 64 * 2**20  # model files, workloads, coefficients: far above any real one
MAX_NESTING = 64  # the deepest real config.json nests 4 levels
MAX_NUMBER = 2**62  # beyond this no byte count, token count or rate means anything


def read_text(path: Path, max_bytes: int = MAX_INPUT_BYTES, field: str = "file") -> str:
    """The file as UTF-8 (a BOM is dropped). A FIFO, a device such as /dev/zero or a file over
    `max_bytes` is refused before a byte is read, so nothing blocks or fills memory."""
    raw = read_bytes(path, max_bytes, field)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(field, str(path), "not UTF-8 text") from None


def read_bytes(path: Path, max_bytes: int = MAX_INPUT_BYTES, field: str = "file") -> bytes:
    path = Path(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(field, str(path), "a regular file (not a pipe, device or folder)")
        if info.st_size > max_bytes:
            raise SpecError(field, str(path), f"{info.st_size:,} bytes; input files are "
                            f"capped at {max_bytes:,} bytes")
        with path.open("rb") as handle:
            return handle.read(max_bytes + 1)[:max_bytes]
    except FileNotFoundError:
        raise SpecError(field, str(path), "no such file") from None
    except OSError as exc:
        raise SpecError(field, str(path), f"cannot be read ({exc.__class__.__name__})") from None


class _NoAliasLoader(yaml.SafeLoader):
    """safe_load, but an alias (*name) is refused: aliases are how a 1 KB file expands into
    gigabytes (billion laughs), and no model or workload file needs one."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise SpecError("yaml", f"line {mark.line + 1}", "aliases (*name) are not allowed "
                            "in servecap input files; write the value out")
        if self.depth > MAX_NESTING:
            raise SpecError("yaml", "nesting", f"nested deeper than {MAX_NESTING} levels")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _scan(text: str) -> None:
    """libyaml's event stream (C speed): an alias or nesting past MAX_NESTING is refused
    before anything is built, as _NoAliasLoader refuses them."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise SpecError("yaml", f"line {event.start_mark.line + 1}", "aliases (*name) are "
                            "not allowed in servecap input files; write the value out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING + 1:
                raise SpecError("yaml", "nesting", f"nested deeper than {MAX_NESTING} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _load(text: str):
    """With libyaml: scan, then its SafeLoader (a 50 MB file in seconds, not minutes);
    without it, the pure-Python loader that checks as it composes."""
    if not hasattr(yaml, "CSafeLoader"):
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    _scan(text)
    return yaml.load(text, Loader=yaml.CSafeLoader)  # noqa: S506 - libyaml's SafeLoader


def parse_yaml(text: str):
    """YAML text -> plain data; every failure is a SpecError (field 'yaml')."""
    try:
        data = _load(text)
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's own limit
            raise SpecError("yaml", "nesting", f"nested deeper than {MAX_NESTING} levels"
                            ) from None
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "document"
        problem = " ".join(str(getattr(exc, "problem", "") or "").split())[:120]
        raise SpecError("yaml", where, "not valid YAML" + (f" ({problem})" if problem else "")
                        ) from None
    except RecursionError:
        raise SpecError("yaml", "nesting", f"nested deeper than {MAX_NESTING} levels") from None
    except SpecError:
        raise
    except ValueError as exc:  # int() past Python's digit limit
        raise SpecError("yaml", "number", f"unreadable number ({_short(exc)})") from None
    check_numbers(data)
    return data


def parse_json(text: str, check: bool = True):
    """JSON text -> plain data; every failure is a SpecError (field 'json'). check=False leaves
    the number checks to the caller (a config.json checks only the fields it reads)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError("json", f"line {exc.lineno}", f"not valid JSON ({exc.msg.lower()} at "
                        f"column {exc.colno})") from None
    except RecursionError:
        raise SpecError("json", "nesting", f"nested deeper than {MAX_NESTING} levels") from None
    except ValueError as exc:  # int() past Python's digit limit
        raise SpecError("json", "number", f"unreadable number ({_short(exc)})") from None
    if check:
        check_numbers(data)
    return data


def check_numbers(data: object) -> None:
    """Refuse data nested past MAX_NESTING, integers past 2^62 and floats that are not finite
    or past 2^62 (the key path is named), before arithmetic overflows on them."""
    stack = [("", data, 0)]
    while stack:
        where, value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SpecError(where or "document", "...", f"nested deeper than {MAX_NESTING} "
                            "levels")
        if isinstance(value, dict):
            stack.extend((_join(where, k), v, depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and (
                abs(value) > MAX_NUMBER or not math.isfinite(value)):
            shown = value if isinstance(value, float) else f"about 2^{value.bit_length()}"
            raise SpecError(where or "document", shown, "a finite number of magnitude at most "
                            "2^62")


def _join(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def _short(exc: Exception) -> str:
    return str(exc).split(";")[0][:80]
