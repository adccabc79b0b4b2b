"""The flags and environment a vLLM log shows: the API server's `non-default args: {...}`
(0.10 on) or `args: Namespace(...)` (before), the engine's config line, the `VLLM_*=value`
settings quoted with the command, and why custom all-reduce was turned off."""

import ast
import re

from .vllm_release import PLACE

# vllm/entrypoints/.../api_utils.py (utils.py before): logger.info("non-default args: %s",
# non_default_args), a dict's repr; V0's api_server printed "args: %s" of an argparse Namespace.
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
NAMESPACE = re.compile(r"\bargs: Namespace\((.*)\)\s*$")
NAMESPACE_ITEM = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?[0-9.]+(?:e-?[0-9]+)?"
                            r"|None|True|False)(?=,|\)|$)")
DICT_ITEM = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|-?[0-9.]+(?:e-?[0-9]+)?|None|True|False)"
                       r"(?=,|\})")
# VLLM_USE_V1=0 vllm serve ..., docker -e VLLM_X=1, export VLLM_X=1: the user's text, not a line
# vLLM's logger printed ("Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence." is advice)
ENV = re.compile(r"(?<![\w-])(VLLM_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s,;'\"\]\)}]+)")
# vllm/distributed/device_communicators/custom_all_reduce.py CustomAllreduce.__init__: the
# reasons it gives for not setting up its buffers (what the collectives then hold differs).
ALLREDUCE_OFF = (("spans across nodes", "nodes"),
                 ("not supported on more than two PCIe-only GPUs", "pcie"),
                 ("lacks GPU P2P capability", "no_p2p"),
                 ("unsupported world size", "world_size"),
                 ("missing custom allreduce library", "library"))


def logged_args(lines: list[str]) -> tuple[tuple[str, object], ...]:
    """(name, value) of the first non-default-args dict or args Namespace in the log, values as
    Python literals; an entry whose value is not a literal (an enum, a class) is left out."""
    return args_read(lines)[0]


def args_read(lines: list[str]) -> tuple[tuple[tuple[str, object], ...], bool]:
    """logged_args' items, and whether they came from a Namespace (every argument)."""
    for line in lines:
        match = NON_DEFAULT.search(line)
        if match:
            return _dict_items(match.group(1)), False
        match = NAMESPACE.search(line)
        if match:
            return tuple((k, _literal(v))
                         for k, v in NAMESPACE_ITEM.findall(match.group(1))), True
    return (), False


def _dict_items(text: str) -> tuple[tuple[str, object], ...]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return tuple((str(k), v) for k, v in value.items())
    return tuple((k, _literal(v)) for k, v in DICT_ITEM.findall(text))


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def logged_env(lines: list[str]) -> tuple[tuple[str, str], ...]:
    """Each VLLM_* variable set in the log's text (the last setting wins), quotes stripped."""
    found: dict[str, str] = {}
    for line in lines:
        if PLACE.search(line):
            continue
        for name, value in ENV.findall(line):
            found[name] = value.strip("'\"")
    return tuple(found.items())


def allreduce_off(lines: list[str]) -> str | None:
    """Why vLLM's custom all-reduce is off ('nodes', 'pcie', 'no_p2p', 'world_size',
    'library'), None when the log does not say it is."""
    for line in lines:
        if "Custom allreduce is disabled" in line:
            return next((why for mark, why in ALLREDUCE_OFF if mark in line), "other")
    return None
