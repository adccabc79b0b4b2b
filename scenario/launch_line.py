"""A pasted engine launch line as a Scenario: one reader, and one table per engine naming each
flag as that engine spells it (scenario/vllm_line.py, sglang_line.py, trtllm_line.py). A flag
servecap models sets its Scenario field; one that does not change GPU memory is listed as
ignored; one that changes memory in a way servecap does not model is refused by name, and so is
a flag the table does not know: nothing is dropped silently."""

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from servecap.ledger.errors import SpecError

from .spec import DEFAULT, Scenario, with_values

# How a modelled flag's value is read; a Dialect adds its own kinds (readers).
_NUMBER = re.compile(r"-[0-9]+(\.[0-9]+)?")
# BOOL and OFF are switches (no value): BOOL sets its field True (--no-FLAG: False), OFF False.
COUNT, FRACTION, TEXT, BOOL, OFF = "count", "fraction", "text", "bool", "off"
WORDS = "words"  # argparse's nargs='+': every word up to the next flag (a tuple)
# --dtype as vLLM and SGLang spell it (the same argparse choices in both): the model dtype
# (dtypes.dtype: weights of an unquantized checkpoint, activations, a KV cache left at auto).
TORCH_DTYPES = {"auto": None, "half": "fp16", "float16": "fp16", "bfloat16": "bf16",
                "float": "fp32", "float32": "fp32"}
Reader = Callable[[str, str, str], dict]  # (value, the flag as errors name it, its field)
# -> {field: value, ...}


@dataclass(frozen=True)
class Dialect:
    """One engine's command line. `modelled` maps a --flag to (Scenario field, kind); BOOL
    flags take no value. Keys of a reader's result that start with '_' are handed to `finish`
    (rules across flags, e.g. SGLang's --ep-size against --tp-size), not to the Scenario;
    '_ignored' lists what a file the flag names holds and servecap ignores."""

    engine: str
    name: str
    usage: str
    entry: Callable[[list[str]], list[str] | None]
    modelled: dict[str, tuple[str, str]]
    aliases: dict[str, str] = field(default_factory=dict)
    ignored_value: frozenset[str] = frozenset()
    ignored_bool: frozenset[str] = frozenset()
    ignored_optional: frozenset[str] = frozenset()  # a value may follow, or not
    neutral: dict[str, str] = field(default_factory=dict)  # only the engine's default: ignored
    refused: dict[str, str] = field(default_factory=dict)
    refused_prefixes: tuple[tuple[str, str], ...] = ()
    readers: dict[str, Reader] = field(default_factory=dict)
    spelling: Callable[[str], str] = str  # vLLM: --max_model_len is --max-model-len
    negatable: bool = False  # vLLM: --no-enable-prefix-caching turns the switch off
    finish: Callable[[dict, str], dict] | None = None


@dataclass(frozen=True)
class LaunchLine:
    """The Scenario a line describes, the flags read, those listed as ignored, and whose line
    it was (the Dialect's name: 'vllm serve', 'sglang', 'trtllm-serve')."""

    scenario: Scenario
    modelled: tuple[str, ...]
    ignored: tuple[str, ...]
    name: str


def dialects() -> tuple[Dialect, ...]:
    """Every engine whose launch line servecap reads."""
    from .sglang_line import SGLANG
    from .trtllm_line import TRTLLM
    from .vllm_line import VLLM

    return VLLM, SGLANG, TRTLLM


def parse_launch_line(argv: list[str] | str, base: Scenario = DEFAULT) -> LaunchLine:
    """Any engine's launch line, its program telling whose (vllm serve, python -m
    sglang.launch_server, sglang serve, trtllm-serve ...)."""
    args = split(argv)
    for dialect in dialects():
        rest = dialect.entry(args)
        if rest is not None:
            return read(dialect, rest, base)
    raise SpecError("launch line", " ".join(args[:3]) or None, "a launch line of "
                    + "; ".join(d.usage for d in dialects()))


def split(argv: list[str] | str) -> list[str]:
    """A pasted string is split as a shell would (a # comment dropped); a list is the
    shell's words already, up to a word that starts a comment."""
    args = shlex.split(argv, comments=True) if isinstance(argv, str) else list(argv)
    return next((args[:i] for i, word in enumerate(args) if word.startswith("#")), args)


def is_python(word: str) -> bool:
    """python, python3, python3.11 or /usr/bin/python3: `python -m MODULE` starts a server."""
    name = word.rsplit("/", 1)[-1]
    return name == "python" or name.startswith("python3")


def module_rest(args: list[str], module: str) -> list[str] | None:
    """The words after `python -m MODULE` (MODULE or a submodule of it), else None."""
    if len(args) >= 3 and is_python(args[0]) and args[1] == "-m" and \
            (args[2] == module or args[2].startswith(module + ".")):
        return args[3:]
    return None


def read(dialect: Dialect, rest: list[str], base: Scenario = DEFAULT) -> LaunchLine:
    """The words after the program, read with the dialect's table."""
    values: dict[str, object] = {"engine.name": dialect.engine}
    modelled, ignored = [], []
    rest = list(rest)
    if rest and not rest[0].startswith("-"):
        values["model.name"] = rest.pop(0)
    while rest:
        flag, value, rest = _next(dialect, rest)
        known, rest = _one(dialect, flag, value, rest)
        if known is None:
            ignored.append(flag)
        else:
            ignored.extend(known.pop("_ignored", ()))  # a file's keys the flag names
            values.update(known)
            modelled.append(flag)
    if dialect.finish is not None:
        values = dialect.finish(values, dialect.name)
    if values.get("model.name") is None and base.model.name is None:
        raise SpecError(f"{dialect.name} MODEL", None, f"the line names no model ({dialect.usage})")
    return LaunchLine(with_values(base, values), tuple(modelled), tuple(ignored), dialect.name)


def read_each(dialect: Dialect, flags: list[list[str]]) -> tuple[dict, list[str], list[str]]:
    """Each flag with its own words ([--flag, value] or [--switch]) read with the dialect's
    table, none refused: a startup log's flags were already taken by the engine. Returns the
    Scenario values, the flags read, and one line for each the ledger does not model (refused
    or unknown: the error's words)."""
    values: dict[str, object] = {}
    read_ok, not_modelled = [], []
    for words in flags:
        try:
            flag, value, rest = _next(dialect, words)
            known, _ = _one(dialect, flag, value, rest)
        except SpecError as error:
            not_modelled.append(str(error))
            continue
        if known is not None:
            known.pop("_ignored", None)
            values.update({k: v for k, v in known.items() if not k.startswith("_")})
            read_ok.append(flag)
    return values, read_ok, not_modelled


def _one(dialect: Dialect, flag: str, value: str | None, rest: list[str]):
    """(the fields one flag sets, or None where it is ignored; the words left)."""
    where, bare = f"{dialect.name} {flag}", _bare(flag) if dialect.negatable else flag
    if bare in dialect.modelled and dialect.modelled[bare][1] in (BOOL, OFF):
        path, kind = dialect.modelled[bare]
        _switch(where, value)
        return {path: (kind == BOOL) != flag.startswith("--no-")}, rest
    if flag in dialect.modelled and dialect.modelled[flag][1] == WORDS:
        return _words(where, dialect.modelled[flag][0], value, rest)
    if flag in dialect.modelled:
        path, kind = dialect.modelled[flag]
        value, rest = _value(where, value, rest)
        return _read(dialect, where, path, kind, value), rest
    if bare in dialect.ignored_bool:
        _switch(where, value)
        return None, rest
    if flag in dialect.ignored_value or flag in dialect.ignored_optional:
        if flag in dialect.ignored_optional and value is None and _no_value(rest):
            return None, rest
        return None, _value(where, value, rest)[1]
    if flag in dialect.neutral:
        value, rest = _value(where, value, rest)
        if value != dialect.neutral[flag]:
            raise SpecError(where, value, f"only {dialect.neutral[flag]} (the default) is "
                            "modelled; remove it to plan without it")
        return None, rest
    given = value if value is not None else True if _no_value(rest) else rest[0]
    why = dialect.refused.get(bare) or next((why for prefix, why in dialect.refused_prefixes
                                             if bare.startswith(prefix)), None)
    if why is not None:
        raise SpecError(where, given, f"not modelled: it {why}; remove it to plan without it")
    raise SpecError(where, given, f"not a {dialect.name} flag servecap knows as modelled or "
                    f"ignored{_spelled(dialect, flag)}; remove it to plan without it")


def _words(where: str, path: str, value: str | None, rest: list[str]):
    """--flag a b c (or --flag=a): the words up to the next flag, as a tuple."""
    if value is not None:
        return {path: (value,)}, rest
    words = []
    while not _no_value(rest):
        words.append(rest.pop(0))
    if not words:
        raise SpecError(where, None, "needs one value or more")
    return {path: tuple(words)}, rest


def _switch(where: str, value: str | None) -> None:
    if value is not None:
        raise SpecError(where, value, "a switch: it takes no value")


def _spelled(dialect: Dialect, flag: str) -> str:
    """', sglang spells it --tp-size' where the other separator names a flag it knows."""
    known = {*dialect.modelled, *dialect.aliases, *dialect.ignored_value, *dialect.ignored_bool,
             *dialect.neutral, *dialect.refused}
    for other in ("--" + flag[2:].replace("-", "_"), "--" + flag[2:].replace("_", "-")):
        if other != flag and other in known:
            return f" ({dialect.name} spells it {other})"
    return ""


def _next(dialect: Dialect, rest: list[str]) -> tuple[str, str | None, list[str]]:
    """One flag as the engine spells it; --flag=value splits."""
    token, rest = rest[0], rest[1:]
    if not token.startswith("-"):
        raise SpecError(dialect.name, token, "a --flag: only the model comes before the flags")
    flag, _, value = token.partition("=")
    flag = dialect.spelling(flag)
    return dialect.aliases.get(flag, flag), (value if "=" in token else None), rest


def _bare(flag: str) -> str:
    """--no-enable-prefix-caching is the same knob as --enable-prefix-caching."""
    return "--" + flag[5:] if flag.startswith("--no-") else flag


def _no_value(rest: list[str]) -> bool:
    """No value follows: the line ends or a flag comes next (-1 is a number, as argparse
    reads it)."""
    return not rest or (rest[0].startswith("-") and not _NUMBER.fullmatch(rest[0]))


def _value(where: str, value: str | None, rest: list[str]) -> tuple[str, list[str]]:
    if value is not None:
        return value, rest
    if _no_value(rest):
        raise SpecError(where, None, "needs a value")
    return rest[0], rest[1:]


def _read(dialect: Dialect, where: str, path: str, kind: str, value: str) -> dict:
    if kind in dialect.readers:
        return dialect.readers[kind](value, where, path)
    if kind == COUNT:
        return {path: count(value, where)}
    if kind == FRACTION:
        return {path: fraction(value, where)}
    return {path: value}


def count(value: str, where: str) -> int:
    """A whole number >= 1, as the engine's int() reads it."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise SpecError(where, value, "a whole number >= 1")
    return number


def fraction(value: str, where: str) -> float:
    """A share in (0, 1], as the engine's float() reads it."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 < number <= 1:
        raise SpecError(where, value, "a fraction in (0, 1]")
    return number


def choice(table: dict, value: str, where: str, note: str = ""):
    """The Scenario's value for one of the engine's spellings (case as the engine allows)."""
    key = str(value).strip().lower()
    if key not in table:
        raise SpecError(where, value, "allowed: " + ", ".join(table) + note)
    return table[key]


def quantization(value: str, where: str, from_checkpoint: frozenset[str]) -> dict:
    """fp8 quantizes the weights online; a checkpoint's own format is read from the
    checkpoint's quantization_config (planned as such); other methods are not modelled."""
    method = str(value).strip().lower()
    if method == "fp8":
        return {"dtypes.weight_dtype": "fp8"}
    if method in from_checkpoint or method == "none":
        return {}
    raise SpecError(where, value, "fp8 (online), or a checkpoint's own format (" +
                    ", ".join(sorted(from_checkpoint)) + "); other methods are not modelled")


def expert_parallel(values: dict, where: str, tp_flag: str) -> dict:
    """An engine's expert-parallel size (`_ep_size`) as the Scenario holds it: 1 keeps the
    experts whole on every rank, the tensor-parallel size splits them over every rank (vLLM's
    --enable-expert-parallel); servecap models no other split."""
    values = dict(values)
    ep = values.pop("_ep_size", None)
    if ep is None:
        return values
    tp = values.get("parallel.tensor_parallel_size", 1)
    if ep not in (1, tp):
        raise SpecError(where, ep, f"1 or the {tp_flag} ({tp}): servecap splits the experts "
                        "over every tensor-parallel rank or none")
    values["parallel.enable_expert_parallel"] = ep == tp and tp > 1
    return values
