"""`servecap diff`: the same deployment under two engines or vLLM releases, line by line."""

import functools
import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from servecap.scenario.diff import compare

from .deploy import NO_DEPLOY, DeployFlags, deploy_options
from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .inputs import PLAN_PATHS, PlanFlags, plan_scenario
from .option_groups import options_from
from .plan_cmd import Out, PlanOptions
from .scenario_opts import LaunchLineArg, ScenarioFile, launch_line, merged

Cmp = functools.partial(typer.Option, rich_help_panel="Comparison")


@deploy_options
@options_from(PlanOptions, "opts", after="model")
def diff(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Argument(help="As plan takes it: a bundled name, a "
                                                "model file or directory, or a Hub id.")] = None,
    against: Annotated[str | None, Cmp(help="The engine or vLLM release to compare with "
                                       "(column B; --engine is A): vllm==0.32, vllm (the "
                                       "newest rules), sglang, trtllm, plain. Required.")]
    = None,
    as_json: Annotated[bool, Out("--json", help="Print one JSON object (integer bytes).")]
    = False,
    xlsx: Annotated[Path | None, Out(help="Also write the comparison as a workbook sheet with "
                                     "live formulas (needs the excel extra).")] = None,
    force: Annotated[bool, Out("--force", help="Replace an existing --xlsx file.")] = False,
    scenario_file: ScenarioFile = None,
    launch: LaunchLineArg = None,
    opts: PlanOptions = None,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Compare one deployment under two engines or vLLM releases, line by line.

    Every ledger line of the binding rank, the engine's pool, the ceiling and the verdict, each
    under --engine (or the scenario's) and under --against; for each difference the release
    rules that make it, with vLLM's source at the tag (docs/releases.md), or each engine's own
    rule. Knobs of one engine are not applied to another (said so). Examples:

      servecap diff llama-3.1-8b --device h100-80gb --engine vllm==0.19 --against vllm==0.32
      servecap diff qwen3-30b-a3b --device h100-80gb --engine vllm --against sglang
      servecap diff --device h100-nvl-94gb --against vllm==0.26 -- vllm serve ./model-dir \\
          --max-model-len 262144 --max-num-batched-tokens 32768 --kv-cache-memory 49G
      servecap diff --scenario chat.yaml --against vllm==0.33 --json

    Exit 0 when the load fits (and the engine starts) under --against, 1 when it does not,
    2 for bad input.
    """
    line = launch_line(model, launch)
    origins: dict[str, str] = {}
    scenario = merged(ctx, plan_scenario(None if line else model, PlanFlags(**asdict(opts)),
                                         deploy), PLAN_PATHS, scenario_file, False, line,
                      origins)
    if xlsx is not None:
        from .sim_xlsx import check_target

        check_target(xlsx, force)
    result = compare(scenario, against)
    if as_json:
        from .diff_view import to_dict

        print(json.dumps(to_dict(result), indent=2))
    else:
        from .diff_view import render

        render(result)
    if xlsx is not None:
        _write(result, scenario, origins, xlsx, force)
    if not (result.b.result.deployment.fits and result.b.starts):
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _write(result, scenario, origins: dict, path: Path, force: bool) -> None:
    """The Diff sheet, and side A's scenario recorded (a workbook is a scenario file)."""
    from servecap.workbooks.diff_sheet import diff_workbook
    from servecap.workbooks.export import save_workbook

    from .files import announce
    from .workbook_scenario import Recording

    record = Recording(scenario, origins).rows(result.a.result.deployment.plan, path)
    announce(save_workbook(diff_workbook(result, record), path, force))


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(diff))

