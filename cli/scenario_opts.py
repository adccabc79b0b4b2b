"""--scenario FILE and --save-scenario FILE: a command's flags over a scenario file's fields
(the command line wins, and -v says so), and the Scenario a command ran written back."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.units import plural
from servecap.scenario.spec import Scenario, get, with_values

from .inputs import shown

PANEL = "Scenario (one file for every command)"
# where --device may be left out (its error says 'required' otherwise), for each --device help
DEVICE_REQUIRED = "Required, unless --scenario or the model file's serving.device gives one."
DEVICE_REQUIRED_BY_MODEL = "Required, unless the model file's serving.device gives one."
ScenarioFile = Annotated[Path | None, typer.Option(
    "--scenario", rich_help_panel=PANEL, help="A scenario YAML (docs/scenario.md), or a "
    "servecap workbook (.xlsx: the scenario it records, its Inputs edits winning): the "
    "deployment question every command reads. Flags given beside it replace its fields.")]
SaveScenario = Annotated[Path | None, typer.Option(
    "--save-scenario", rich_help_panel=PANEL, help="Write the scenario this run used (file "
    "and flags merged, every field spelled out) to FILE, for --scenario.")]
_GIVEN = ("COMMANDLINE", "ENVIRONMENT")  # click's ParameterSource names


def merged(ctx: typer.Context, built: Scenario, paths: dict[str, tuple[str, ...]],
           file: Path | None, verbose: bool = False, line: list[str] | None = None,
           origins: dict[str, str] | None = None) -> Scenario:
    """The file's Scenario (then a pasted launch line's) with each field a flag gave on the
    command line replaced by the flag's value (built: the Scenario of every flag, defaults
    included). Neither file nor line: built. A workbook (.xlsx) is a file too: its recorded
    scenario, with its Inputs cells edited since over it. origins, when given, is filled with
    where each field set came from (a workbook's Scenario sheet shows it)."""
    found = {} if origins is None else origins
    if file is None and not line:
        found.update(_flag_origins(ctx, paths, line))
        return built
    from servecap.scenario.spec import DEFAULT

    base, origin, file_notes = DEFAULT, "the launch line's", []
    if file is not None:
        base, file_notes = _read(file, found)
        origin = f"{file}'s"
    if line:
        before = base
        base, name = line_scenario(line, base)
        origin = f"the {_ENGINE_WORD.get(name, name)} line's"
        found.update(_changed(base, before, f"{name} line"))
    values, notes = {}, []
    for param, targets in paths.items():
        if not _given(ctx, param, line):
            continue
        for path in targets:
            values[path] = get(built, path)
            if get(base, path) != values[path]:
                notes.append(f"{path}: {_flag(ctx, param)} {shown(values[path])} (command "
                             f"line) over {origin} {shown(get(base, path))}")
    found.update(_flag_origins(ctx, paths, line))
    if verbose:
        print(f"scenario: {file or origin[:-2]}, {plural(len(values), 'field')} from flags",
              file=sys.stderr)
        for note in file_notes + notes:
            print(note, file=sys.stderr)
    scenario = with_values(base, values)
    if file is not None:
        from .file_errors import remember

        remember(file, found, paths, scenario)
    return scenario


def _read(file: Path, origins: dict[str, str]) -> tuple[Scenario, list[str]]:
    """A scenario YAML, or a workbook's recorded scenario (its Inputs edits noted)."""
    from servecap.ledger.errors import SpecError
    from servecap.scenario.spec import DEFAULT

    from .workbook_scenario import is_workbook

    if not Path(file).exists():  # a YAML or a workbook alike: named by the flag, as --xlsx is
        raise SpecError("--scenario", str(file), "no such file")
    if is_workbook(file):
        from .extras import EXCEL, need
        from .workbook_scenario import workbook_scenario

        need("a workbook", EXCEL)
        read = workbook_scenario(file, "--scenario")
        origins.update(read.origins)
        return read.scenario, read.notes
    from servecap.scenario.file import load_scenario

    scenario = load_scenario(file)
    origins.update(_changed(scenario, DEFAULT, str(file)))
    return scenario, []


def _changed(scenario: Scenario, than: Scenario, origin: str) -> dict[str, str]:
    """Each field `scenario` sets differently from `than`, credited to `origin`."""
    from servecap.scenario.spec import paths as every_path

    return {p: origin for p in every_path() if get(scenario, p) != get(than, p)}


def _given(ctx: typer.Context, param: str, line: list[str] | None) -> bool:
    source = ctx.get_parameter_source(param)
    return source is not None and source.name in _GIVEN and not (line and param == "model")


def _flag_origins(ctx: typer.Context, paths: dict[str, tuple[str, ...]],
                  line: list[str] | None) -> dict[str, str]:
    return {path: f"{_flag(ctx, param)} (command line)" for param, targets in paths.items()
            if _given(ctx, param, line) for path in targets}


LaunchLineArg = Annotated[list[str] | None, typer.Argument(
    help="After --: an engine's launch line to plan (vllm serve MODEL ..., python -m "
    "sglang.launch_server --model-path MODEL ..., sglang serve MODEL ..., trtllm-serve MODEL "
    "...), read with that engine's flag names and defaults; servecap flags before -- replace "
    "its values.", show_default=False)]
# Flags a line may give that the other commands model but plan does not.
PLAN_UNMODELLED = {"--speculative-config": "a draft model's weights and KV (simulate sizes "
                   "them)", "--num-gpu-blocks-override": "a capped pool (simulate caps it)"}
_ENGINE_WORD = {"vllm serve": "vLLM", "sglang": "SGLang", "trtllm-serve": "TensorRT-LLM"}
_PROGRAMS = ("vllm", "sglang", "trtllm-serve")


def line_scenario(line: list[str], base: Scenario) -> tuple[Scenario, str]:
    """The pasted line's Scenario over `base`, and whose line it was ('vllm serve', 'sglang',
    'trtllm-serve'); the flags it ignores are listed on stderr (they do not change GPU memory),
    never dropped silently."""
    from servecap.ledger.errors import SpecError
    from servecap.scenario.launch_line import parse_launch_line

    parsed = parse_launch_line(line, base)
    for flag in parsed.modelled:
        if flag in PLAN_UNMODELLED:
            raise SpecError(f"{parsed.name} {flag}", None, "plan does not model "
                            + PLAN_UNMODELLED[flag] + "; remove it to plan")
    if parsed.ignored:
        print(f"{parsed.name}: ignored ({len(parsed.ignored)}, they do not change GPU "
              "memory): " + ", ".join(parsed.ignored), file=sys.stderr)
    return parsed.scenario, parsed.name


def launch_line(model: str | None, rest: list[str] | None) -> list[str] | None:
    """plan's positionals: MODEL alone, or after -- a whole launch line (vllm serve ...,
    python -m sglang.launch_server ..., trtllm-serve ...)."""
    if not rest:
        return None
    from servecap.ledger.errors import SpecError
    from servecap.scenario.launch_line import is_python, parse_launch_line

    if rest[0].rsplit("/", 1)[-1] in _PROGRAMS or is_python(rest[0]):
        raise SpecError("MODEL", model, "give MODEL, or a launch line after -- (vllm serve "
                        "MODEL ...), not both")
    if model is not None and model.rsplit("/", 1)[-1] not in _PROGRAMS and \
            not is_python(model):
        parse_launch_line([model, *rest])  # names the programs it reads
    return [model, *rest]


def save(scenario: Scenario, path: Path | None, plan=None,
         in_effect: dict[str, object] | None = None, engine: dict | None = None) -> None:
    """--save-scenario: the file written whole, or nothing; with the ledger plan the run made
    and the values the run itself took (in_effect, over the plan's), each null field it
    derived carries its value as a comment, and with the engine a run simulated
    (steps.engine_label) a null simulator.engine says which release it was."""
    if path is not None:
        from servecap.scenario.deployment import in_effect as planned
        from servecap.scenario.file import save_scenario

        found = planned(scenario, plan) if plan is not None else {}
        found |= in_effect or {}  # what the run itself took wins over the ledger plan's
        if engine is not None and scenario.simulator.engine is None:
            found["simulator.engine"] = engine["about"]
        save_scenario(scenario, path, in_effect=found or None)


def from_flags(params: dict, paths: dict[str, tuple[str, ...]]) -> Scenario:
    """The Scenario a command's flags describe, field by field (paths: flag -> fields), over
    the defaults; a file path flag is kept as its text."""
    from servecap.scenario.spec import DEFAULT

    values = {}
    for param, targets in paths.items():
        value = params[param]
        for target in targets:
            values[target] = str(value) if isinstance(value, Path) else value
    return with_values(DEFAULT, values)


def _flag(ctx: typer.Context, param: str) -> str:
    found = next((p for p in ctx.command.params if p.name == param), None)
    if found is not None and found.param_type_name == "argument":
        return param.upper()  # MODEL, as --help shows it
    if found is not None and found.secondary_opts and ctx.params.get(param) is False:
        return found.secondary_opts[0]  # --no-capacity, as typed
    return found.opts[0] if found is not None and found.opts else param


def unmapped(command, paths: dict[str, tuple[str, ...]], outputs: set[str]) -> set[str]:
    """A command's parameters that neither describe the Scenario nor shape the output: each
    must be one or the other (tests/cli/test_scenario_cli.py holds this)."""
    import inspect

    names = set(inspect.signature(command).parameters)
    return names - set(paths) - outputs
