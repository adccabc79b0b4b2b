"""`servecap reconcile`: a vLLM startup log beside the plan of the same deployment."""

import json
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.errors import SpecError
from servecap.ledger.reconcile import Reconciliation
from servecap.ledger.units import GiB, plural
from servecap.scenario import reconciliation

from .deploy import NO_DEPLOY, DeployFlags, deploy_options
from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .hanging import print_hanging
from .inputs import PLAN_PATHS, PlanFlags, plan_scenario
from .scenario_opts import SaveScenario, ScenarioFile, merged, save

Opt = typer.Option
ENGINE_NAMES = {"sglang": "SGLang", "trtllm": "TensorRT-LLM"}


RECONCILE_PATHS = {name: PLAN_PATHS[name] for name in (
    "model", "device", "block_size", "kv_dtype", "weight_dtype", "max_num_batched_tokens",
    *(f.name for f in fields(DeployFlags)))} | {"max_model_len": ("scheduler.max_model_len",)}


@deploy_options
def reconcile_cmd(
    ctx: typer.Context,
    log: Annotated[Path, typer.Argument(help="A startup log: vLLM's (V0 or V1), or SGLang's or "
                                        "TensorRT-LLM's with --engine sglang|trtllm.")],
    model: Annotated[str | None, Opt("--model", help="The model the log served: bundled name, "
                                     "YAML, config.json, directory or Hub id org/name; "
                                     "required unless --scenario gives it.")] = None,
    device: Annotated[str | None, Opt(help="Device (catalog name or size). Default: the log's "
                                      "total_gpu_memory.")] = None,
    max_model_len: Annotated[int | None, Opt("--max-model-len", "--context",
                                             help="Default: the log's.")] = None,
    block_size: Annotated[int | None, Opt(help="The engine's block (page) size in tokens. "
                                          "Default: the log's, else the engine's (vLLM 16, "
                                          "SGLang 1, TensorRT-LLM 32).")] = None,
    kv_dtype: Annotated[str | None, Opt("--kv-cache-dtype", "--kv-dtype", help="KV cache "
                                        "dtype, vLLM's (auto, fp8, ...). Default: the log's, "
                                        "else the model's.")] = None,
    weight_dtype: Annotated[str | None, Opt("--weight-dtype", help="Weights as the engine "
                                            "holds them when the config does not say "
                                            "(e.g. fp8 for an FP8 checkpoint). Default: the "
                                            "config's.")] = None,
    max_num_batched_tokens: Annotated[int | None, Opt(help="Tokens of vLLM's profile pass. "
                                                      "Default: the log's, else the "
                                                      "release's.")] = None,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object.")] = False,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Plan the deployment a startup log came from and compare each figure: residual and advice.

    vLLM: the rules are the log's release (stated, placed by where its lines are printed, or
    the newest known, said so), or --engine vllm==X. --engine sglang or trtllm reads that
    engine's log and plans with its budget (mem_fraction_static, free_gpu_memory_fraction).
    Give the flags the engine was started with (vLLM's own names) where the log does not
    print them. Every memory line of the log is listed with what was read from it. Exit 0
    when the plan agrees (same start verdict, KV within 5%), 1 when it does not. Example:

      servecap reconcile vllm.log --model llama-3.1-8b --device a100-40gb -tp 2
      servecap reconcile vllm.log --scenario chat.yaml   # the deployment a scenario plans
    """
    flags = PlanFlags(device=device, context=max_model_len, concurrency=1, block_size=block_size,
                      kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                      max_num_batched_tokens=max_num_batched_tokens)
    scenario = merged(ctx, plan_scenario(model, flags, deploy), RECONCILE_PATHS, scenario_file)
    if scenario.model.name is None:
        served = reconciliation.served_model(log)
        named = f" (the log loads {served!r}: its Hub id, a local copy or a bundled name)" \
            if served else ""
        raise SpecError("--model", None, f"required: the model the log served{named}, or "
                        "--scenario FILE that names it")
    result = reconciliation.reconcile_log(log, scenario)
    save(scenario, save_scenario)
    if as_json:
        print(json.dumps(to_dict(result, log), indent=2))
    else:
        render(result, log)
    if not result.agrees:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _cell(value: float, unit: str) -> str:
    if unit == "flag":  # the one flag row: 'engine starts (1) or refuses (0)'
        return "starts" if value else "refuses"
    if unit == "GiB":
        text = f"{value / GiB:,.2f} GiB"
    else:
        text = f"{value:,.2f}x" if unit == "x" else f"{value:,.0f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,GiBx ") else text


def render(result: Reconciliation, log: Path) -> None:
    """Predicted vs logged per line, then every log line read (rich only here, not --json)."""
    from rich.console import Console
    from rich.table import Table

    from .narrow import print_table

    console = Console()
    engine = ENGINE_NAMES.get(result.engine_version, f"vLLM {result.engine_version.upper()}")
    table = Table(title=f"{log.name} ({engine}) vs the plan for {result.model}",
                  title_justify="left")
    for column in ("line", "predicted", "logged", "residual", "advice"):
        table.add_column(column, justify="left" if column in ("line", "advice") else "right",
                         overflow="fold")
    for row in result.rows:
        residual = "" if row.unit == "flag" else _cell(row.residual, row.unit)
        table.add_row(row.label, _cell(row.predicted, row.unit), _cell(row.logged, row.unit),
                      residual if residual.startswith("-") or not residual else "+" + residual,
                      row.advice)
    if print_table(console, table, drop=("advice",)):  # too narrow: the advice goes under it
        console.print("advice:")
        for row in result.rows:
            print_hanging(console, f"{row.label}: {row.advice}")
    for note in result.notes:
        console.print(f"note: {note}", style="yellow", markup=False, highlight=False)
    console.print(f"read {plural(len(result.lines), 'memory line')} of the log:")
    for line in result.lines:  # wrapped under the log's text, past the line number
        print_hanging(console, f"{line.number:>4}: {line.read or 'no figure'} | "
                      f"{line.text[:160]}", hang=8)
    console.print("the plan " + ("agrees with" if result.agrees else "disagrees with") +
                  " the log" + ("" if result.agrees else " (exit 1)"))


def to_dict(result: Reconciliation, log: Path) -> dict:
    """Memory rows in int bytes (unit 'bytes'); blocks and tokens ints; concurrency a float."""
    def number(value, unit):
        return float(value) if unit == "x" else int(round(value))
    rows = [{"key": r.key, "label": r.label, "unit": "bytes" if r.unit == "GiB" else r.unit,
             "predicted": number(r.predicted, r.unit), "logged": number(r.logged, r.unit),
             "residual": number(r.residual, r.unit), "advice": r.advice} for r in result.rows]
    return {"log": str(log), "model": result.model, "engine_version": result.engine_version,
            "rows": rows, "notes": list(result.notes), "agrees": result.agrees,
            "lines_read": [{"line": x.number, "read": x.read, "text": x.text}
                           for x in result.lines]}


def register(app: typer.Typer) -> None:
    app.command("reconcile")(handle_errors(reconcile_cmd))
