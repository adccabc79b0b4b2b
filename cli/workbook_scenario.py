"""A workbook's recorded scenario: the Scenario sheet written from the Scenario a command ran,
and read back (with the Inputs cells edited since winning) by --from-workbook and --scenario."""

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from servecap.ledger.errors import SpecError
from servecap.scenario.spec import DEFAULT, Scenario, get, paths, with_values

from .deploy import DeployFlags
from .inputs import PLAN_PATHS, PlanFlags, plan_scenario, shown

ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class FromWorkbook:
    """The scenario a workbook describes now; notes: which won, for -v; origins: where each
    field set came from (the next workbook's source column)."""

    scenario: Scenario
    notes: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)


def is_workbook(path: Path) -> bool:
    """An .xlsx by its name, or any zip (a scenario YAML never starts with PK)."""
    if Path(path).suffix.lower() == ".xlsx":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == ZIP_MAGIC
    except OSError:
        return False


@dataclass(frozen=True)
class Recording:
    """What a command hands its workbook writer: the Scenario it ran and where each field came
    from (merged's origins)."""

    scenario: Scenario
    origins: dict[str, str] = field(default_factory=dict)

    def rows(self, plan, output: Path):
        """The Scenario sheet for a workbook written to `output` from `plan` (a ledger Plan;
        None: no field's value in effect is known)."""
        return record(self.scenario, plan, self.origins, output)


def record(scenario: Scenario, plan, origins: dict[str, str] | None, output: Path):
    """The Scenario sheet's rows: every field as --save-scenario writes it (paths relative to
    the workbook's folder), and its source: a flag, a file, or the default and what it took."""
    from servecap.scenario.deployment import in_effect
    from servecap.scenario.file import relative_to
    from servecap.workbooks.scenario_sheet import DEFAULT as DEFAULT_SOURCE
    from servecap.workbooks.scenario_sheet import RecordedScenario

    taken = {} if plan is None else in_effect(scenario, plan)
    written = relative_to(scenario, Path(output).parent)
    rows = []
    for path in paths():
        value = get(scenario, path)
        source = (origins or {}).get(path) or (
            DEFAULT_SOURCE if value == get(DEFAULT, path) else "the command's default")
        if path in taken:
            source += f"; in effect: {taken[path]}"
        rows.append((path, yaml_text(get(written, path)), source))
    return RecordedScenario(tuple(rows))


def yaml_text(value) -> str:
    """One field's value as a scenario file writes it (flow style: [a, b])."""
    plain = list(value) if isinstance(value, tuple) else value
    text = yaml.safe_dump(plain, default_flow_style=True, width=2**20, allow_unicode=True)
    if "\n" in _one(text) or yaml.safe_load(text) != plain:  # a break or odd space: escaped
        text = yaml.safe_dump(plain, default_flow_style=True, width=2**20,
                              allow_unicode=True, default_style='"')
    return _one(text)


def _one(text: str) -> str:
    return text.removesuffix("\n...\n").rstrip("\n")  # a document's end, not its spaces


def workbook_scenario(path: Path, field: str = "--from-workbook") -> FromWorkbook:
    """The recorded scenario with each Inputs cell edited since it was written over its field;
    a workbook without a record plans its Inputs, as before servecap recorded scenarios. field:
    the flag the workbook was given with, naming a file that is not one."""
    from servecap.workbooks.readback import CELL_OF_FLAG, edited_inputs, read_workbook

    from .workbook_inputs import flags_of_inputs

    inputs, recorded = read_workbook(path, field)
    if recorded is None:
        return FromWorkbook(plan_scenario(*flags_of_inputs(inputs, path)),
                            [f"{path}: no Scenario sheet (written before servecap recorded "
                             "one): the Inputs sheet alone"])
    fields, written = recorded
    base = recorded_scenario(fields, path)
    origins = {p: str(path) for p in paths() if get(base, p) != get(DEFAULT, p)}
    if inputs is None:  # search's workbook: the record alone
        return FromWorkbook(base, [], origins)
    edits = edited_inputs(inputs, written, path)
    if "model" in edits:  # another model typed in: its cells must be that model's, as before
        flags_of_inputs(inputs, path)
    flags = {**inputs.flags, **{k: v for k, v in edits.items() if k in inputs.flags}}
    now = plan_scenario(inputs.model_ref, PlanFlags(**flags), DeployFlags(**inputs.deploy))
    values, notes = {}, []
    for key in edits:
        cell = f"Inputs!{CELL_OF_FLAG.get(key, key)}"
        for target in PLAN_PATHS[key]:
            values[target] = get(now, target)
            origins[target] = f"{cell} (edited in {Path(path).name})"
            if values[target] != get(base, target):
                notes.append(f"{target}: {cell} {shown(values[target])} (edited in the "
                             f"workbook) over {path}'s Scenario sheet {shown(get(base, target))}")
    return FromWorkbook(with_values(base, values), notes, origins)


def recorded_scenario(fields: dict[str, object], path: Path) -> Scenario:
    """The Scenario sheet's fields validated as a scenario file is (one line naming the file,
    Scenario!section.field, the value and what is allowed)."""
    from servecap.scenario.file import from_dict, resolved_from

    data: dict[str, dict] = {}
    for name, cell in fields.items():
        section, key = name.split(".", 1)
        data.setdefault(section, {})[key] = _value(name, cell, path)
    try:
        scenario = from_dict(data, str(path))
    except SpecError as exc:
        raise SpecError(f"Scenario!{exc.field}", exc.value, exc.allowed, str(path)) from None
    return resolved_from(scenario, Path(path).parent)


def _value(name: str, cell, path: Path):
    """A value cell as YAML: text parsed as a scenario file's value is; a number or a boolean
    a spreadsheet stored as such is taken as it is; an emptied cell is null."""
    if cell is None or isinstance(cell, bool | int | float):
        return cell
    try:
        return yaml.safe_load(str(cell))
    except yaml.YAMLError:
        raise SpecError(f"Scenario!{name}", cell, "a YAML value, as in a scenario file: a "
                        "number, true or false, null, text (quoted where it reads as a "
                        "number) or a list [a, b]", str(path)) from None
