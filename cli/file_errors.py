"""A bad value a scenario file (or a workbook's record) gave is named where it was written,
`s4.yaml: device.name = 'h100': ...` (docs/scenario.md), not as the flag it would have been
given with: the derivations below the CLI name flags (--device, --kv-dtype), so the command
remembers which fields its file set, and the one error handler (cli/errors.py) renames an
error about such a field."""

from pathlib import Path

from servecap.ledger.errors import SpecError

_KEY = "servecap.file_fields"


def remember(file: Path, origins: dict[str, str], paths: dict[str, tuple[str, ...]],
             scenario) -> None:
    """Note, on the running command's context, the fields whose value came from `file` (its
    name, or a workbook's Inputs cell edited in it: the origins scenario_opts.merged and
    workbook_scenario give), their values in `scenario`, and the command's flag -> fields."""
    from servecap.scenario.spec import get

    ctx = _context()
    if ctx is None:
        return
    name = str(file)
    from_file = {path: get(scenario, path) for path, origin in origins.items()
                 if origin == name or origin.endswith(f"(edited in {Path(file).name})")}
    ctx.meta[_KEY] = (name, from_file, paths)


def in_file(exc: SpecError) -> SpecError:
    """exc named by the file's field when the value it is about came from the file: the
    file's name, the field, the value and what is allowed. A flag reported missing that the
    file could have given names that field too. Any other error as it is."""
    ctx = _context()
    known = ctx is not None and ctx.meta.get(_KEY)
    if not known or exc.source or not exc.field.startswith("-"):
        return exc
    name, from_file, paths = known
    fields = _fields_of(exc.field, ctx, paths)
    if exc.value is None:
        if fields and not any(f in from_file for f in fields):
            return SpecError(f"{exc.field} (or {fields[0]} in {name})", None, exc.allowed)
        return exc
    for field in fields:
        given = from_file.get(field)
        if field in from_file and _holds(given, exc.value):  # a list's bad item, named alone
            return SpecError(field, exc.value if isinstance(given, list | tuple) else given,
                             exc.allowed, name)
    return exc


def by_flag(exc: SpecError) -> SpecError:
    """A file that cannot be read ('file' errors of model_configs/reading.py) named by the
    flag or argument it was given with, once: '--workload = 'w.yaml': no such file', not
    'w.yaml: file = 'w.yaml': ...'. Any other error, or a file no parameter was given, as
    it is."""
    ctx = _context()
    if ctx is None or exc.field != "file" or exc.value is None:
        return exc
    for param in ctx.command.params:
        given = ctx.params.get(param.name)
        if given is None or isinstance(given, bool) or str(given) != str(exc.value):
            continue
        name = param.opts[0] if param.param_type_name == "option" else param.name.upper()
        source = "" if exc.source == str(exc.value) else exc.source
        return SpecError(name, exc.value, exc.allowed, source)
    return exc


def _holds(given, value) -> bool:
    """Whether the file's value is the bad one, or a list (simulator.policies) holding it."""
    items = given if isinstance(given, list | tuple) else [given]
    return str(value) in (str(item) for item in items) or str(value) == str(given)


def _context():
    """The running command's click context (typer's own click: vendored since typer 0.22)."""
    import importlib

    from .app import click

    return importlib.import_module(f"{click.__name__}.globals").get_current_context(silent=True)


def _fields_of(flag: str, ctx, paths: dict[str, tuple[str, ...]]) -> list[str]:
    """The scenario fields a flag sets: through the command's option of that name, else the
    field spelled as the flag (--safety: memory.safety)."""
    for param in ctx.command.params:
        if flag in (*param.opts, *param.secondary_opts) and param.name in paths:
            return list(paths[param.name])
    from servecap.scenario.spec import paths as every_path

    return [p for p in every_path() if "--" + p.split(".")[1].replace("_", "-") == flag]
