"""A scenario file: YAML validated with pydantic into the Scenario's dataclasses at the edge
(one-line errors naming the file, the field, the value and what is allowed), and the file a
command writes back with every field spelled out."""

import os
import tempfile
from dataclasses import asdict, fields
from functools import cache
from pathlib import Path

import yaml
from pydantic import TypeAdapter, ValidationError

from servecap.ledger.errors import SpecError, document_kind
from servecap.model_configs.reading import parse_yaml, read_text

from .spec import SECTIONS, Scenario, get, with_values

PATHS = ("workload.file", "workload.trace", "simulator.coefficients", "model.name",
         "speculative.model", "runtime.weights", "client.dataset",
         "server.tokenizer")  # relative to the scenario file
HEADER = ("# servecap scenario: one deployment question (docs/scenario.md). null: not given,\n"
          "# the default applies where it is derived (the run's value in a comment).\n")


@cache
def _adapter() -> TypeAdapter:
    """The Scenario's validator. scenario/spec.py and spec_runs.py keep their annotations as
    text; pydantic reads the names they use from this frame, the validator's parent namespace."""
    from pydantic import Field, StrictBool  # noqa: F401

    from .spec_types import Count, Fraction, Real, Size, Text, Zero  # noqa: F401

    return TypeAdapter(Scenario)


def load_scenario(path: Path) -> Scenario:
    """The Scenario a YAML file describes; every failure is one SpecError naming the file."""
    where = str(path)
    try:
        data = parse_yaml(read_text(Path(path)))
    except SpecError as exc:
        raise exc.at(where) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("document", document_kind(data), "a scenario is a mapping of "
                        "sections: " + ", ".join(SECTIONS)).at(where)
    return _paths(from_dict(data, where), Path(path).parent, _from_file)


def relative_to(scenario: Scenario, folder: Path) -> Scenario:
    """The paths it names as a file kept in `folder` writes them (a workbook's record too)."""
    return _paths(scenario, folder, _to_file)


def resolved_from(scenario: Scenario, folder: Path) -> Scenario:
    """The paths a file kept in `folder` names, as seen from the working directory."""
    return _paths(scenario, folder, _from_file)


def _paths(scenario: Scenario, folder: Path, move) -> Scenario:
    """Each relative path a scenario names, re-based between the scenario's folder and the
    working directory (absolute paths and bundled model names are left as they are)."""
    values = {}
    for name in PATHS:
        value = get(scenario, name)
        if isinstance(value, str) and not os.path.isabs(value):
            moved = move(value, folder)
            if moved != value:
                values[name] = moved
    return with_values(scenario, values)


def _from_file(value: str, folder: Path) -> str:
    """A path written relative to the scenario file, as seen from the working directory."""
    joined = os.path.normpath(os.path.join(folder, value))
    return joined if os.path.exists(joined) else value  # else a bundled name or a Hub id


def _to_file(value: str, folder: Path) -> str:
    """A path from the working directory, written relative to the scenario file's folder."""
    if not os.path.exists(value):
        return value  # a bundled model name or a Hub id
    return os.path.relpath(value, folder)


def from_dict(data: dict, where: str = "scenario") -> Scenario:
    """Validate a mapping (a parsed file) into a Scenario."""
    try:
        return _adapter().validate_python(data)
    except ValidationError as exc:
        raise _one_line(exc).at(where) from None


def _one_line(exc: ValidationError) -> SpecError:
    """The first problem, as section.field = value: what is allowed."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    names = loc[:2] if loc and loc[0] in SECTIONS else loc[:1]
    field = ".".join(names) or "document"
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return SpecError(field, err.get("input"), "unknown key; allowed: " +
                         ", ".join(_allowed(names[:-1])))
    if err["type"] == "missing":
        return SpecError(field, None, "required")
    same = [e["msg"].replace("Input should", "should") for e in exc.errors()
            if [str(p) for p in e["loc"]][:len(names)] == names]  # a union: each alternative
    return SpecError(field, err.get("input"), " or ".join(dict.fromkeys(same)))


def _allowed(section: list[str]) -> list[str]:
    if not section:
        return list(SECTIONS)
    cls = next(f.default_factory for f in fields(Scenario) if f.name == section[0])
    return [f.name for f in fields(cls)]


def to_dict(scenario: Scenario) -> dict:
    """Every section and field, tuples as lists (YAML's sequences)."""
    def plain(value):
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(asdict(scenario))


def dump(scenario: Scenario, in_effect: dict[str, object] | None = None) -> str:
    """The scenario file's text; a field left null that the run derived says what it took, as
    a comment (the file's meaning is unchanged: null is derived again)."""
    text = yaml.safe_dump(to_dict(scenario), sort_keys=False, allow_unicode=True)
    if not in_effect:
        return HEADER + text
    lines, section = [], None
    for line in text.splitlines():
        if not line.startswith(" ") and line.endswith(":"):
            section = line[:-1]
        name = line.strip().split(":")[0]
        value = in_effect.get(f"{section}.{name}")
        if line.startswith("  ") and line.endswith(": null") and value is not None:
            line += f"  # in effect: {value}"
        lines.append(line)
    return HEADER + "\n".join(lines) + "\n"


def save_scenario(scenario: Scenario, path: Path, field: str = "--save-scenario",
                  in_effect: dict[str, object] | None = None) -> None:
    """Write the file whole or not at all (a temporary file renamed over the target)."""
    path = Path(path)
    if path.is_dir():
        raise SpecError(field, str(path), "a file path, not a folder")
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise SpecError(field, str(path), f"a writable path ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dump(_paths(scenario, parent, _to_file), in_effect))
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise SpecError(field, str(path), f"a writable path ({exc.strerror})") from None
