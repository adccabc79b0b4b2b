"""--scenario FILE and --save-scenario FILE: a command's flags over a scenario file's fields
(the command line wins, and -v says so), and the Scenario a command ran written back."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from servecap.scenario.spec import Scenario, get, with_values

PANEL = "Scenario (one file for every command)"
ScenarioFile = Annotated[Path | None, typer.Option(
    "--scenario", rich_help_panel=PANEL, help="A scenario YAML (docs/scenario.md): the "
    "deployment question every command reads. Flags given beside it replace its fields.")]
SaveScenario = Annotated[Path | None, typer.Option(
    "--save-scenario", rich_help_panel=PANEL, help="Write the scenario this run used (file "
    "and flags merged, every field spelled out) to FILE, for --scenario.")]
_GIVEN = ("COMMANDLINE", "ENVIRONMENT")  # click's ParameterSource names


def merged(ctx: typer.Context, built: Scenario, paths: dict[str, tuple[str, ...]],
           file: Path | None, verbose: bool = False, line: list[str] | None = None) -> Scenario:
    """The file's Scenario (then a pasted vLLM line's) with each field a flag gave on the
    command line replaced by the flag's value (built: the Scenario of every flag, defaults
    included). Neither file nor line: built."""
    if file is None and not line:
        return built
    from servecap.scenario.spec import DEFAULT

    base, origin = DEFAULT, "vllm serve"
    if file is not None:
        from servecap.scenario.file import load_scenario

        base, origin = load_scenario(file), f"{file}'s"
    if line:
        base = vllm_scenario(line, base)
        origin = "the vLLM line's"
    values, notes = {}, []
    for param, targets in paths.items():
        source = ctx.get_parameter_source(param)
        if source is None or source.name not in _GIVEN or (line and param == "model"):
            continue
        for path in targets:
            values[path] = get(built, path)
            if get(base, path) != values[path]:
                notes.append(f"{path}: {_flag(ctx, param)} {_shown(values[path])} (command "
                             f"line) over {origin} {_shown(get(base, path))}")
    if verbose:
        print(f"scenario: {file or 'the vLLM line'}, {len(values)} field(s) from flags",
              file=sys.stderr)
        for note in notes:
            print(note, file=sys.stderr)
    return with_values(base, values)


VllmLine = Annotated[list[str] | None, typer.Argument(
    help="After --: a vLLM launch line (vllm serve MODEL [vLLM flags]) to plan, read with "
    "vLLM's flag names and defaults; servecap flags before -- replace its values.",
    show_default=False)]
PLAN_UNMODELLED = {"--speculative-config": "a draft model's weights and KV (simulate sizes "
                   "them)", "--num-gpu-blocks-override": "a capped pool (simulate caps it)"}


def vllm_scenario(line: list[str], base: Scenario) -> Scenario:
    """The pasted line's Scenario over `base`; the flags it ignores are listed on stderr (they
    do not change GPU memory), never dropped silently."""
    from servecap.ledger.errors import SpecError
    from servecap.scenario.vllm_line import parse_vllm_line

    parsed = parse_vllm_line(line, base)
    for flag in parsed.modelled:
        if flag in PLAN_UNMODELLED:
            raise SpecError(f"vllm serve {flag}", None, "plan does not model "
                            + PLAN_UNMODELLED[flag] + "; remove it to plan")
    if parsed.ignored:
        print(f"vllm serve: ignored ({len(parsed.ignored)}, they do not change GPU memory): "
              + ", ".join(parsed.ignored), file=sys.stderr)
    return parsed.scenario


def launch_line(model: str | None, rest: list[str] | None) -> list[str] | None:
    """plan's positionals: MODEL alone, or after -- a whole launch line (vllm serve ...)."""
    if not rest:
        return None
    if model not in ("vllm", "python", "python3"):
        from servecap.ledger.errors import SpecError

        raise SpecError("MODEL", model, "give MODEL, or a launch line after -- (vllm serve "
                        "MODEL ...), not both")
    return [model, *rest]


def save(scenario: Scenario, path: Path | None, plan=None, engine: dict | None = None) -> None:
    """--save-scenario: the file written whole, or nothing; with the ledger plan the run made,
    each null field the plan derived carries its value as a comment, and with the engine a
    run simulated (steps.engine_label) a null simulator.engine says which release it was."""
    if path is not None:
        from servecap.scenario.deployment import in_effect
        from servecap.scenario.file import save_scenario

        taken = {} if plan is None else in_effect(scenario, plan)
        if engine is not None and scenario.simulator.engine is None:
            taken["simulator.engine"] = engine["about"]
        save_scenario(scenario, path, in_effect=taken or None)


def _flag(ctx: typer.Context, param: str) -> str:
    found = next((p for p in ctx.command.params if p.name == param), None)
    return found.opts[0] if found is not None and found.opts else param


def _shown(value) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return "null" if value is None else str(value)


def unmapped(command, paths: dict[str, tuple[str, ...]], outputs: set[str]) -> set[str]:
    """A command's parameters that neither describe the Scenario nor shape the output: each
    must be one or the other (tests/cli/test_scenario_cli.py holds this)."""
    import inspect

    names = set(inspect.signature(command).parameters)
    return names - set(paths) - outputs
