"""`servecap reconcile`: a vLLM startup log beside the plan of the same deployment."""

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.engines import PLAIN, VLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Overrides
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.reconcile import Reconciliation, check_same_model, reconcile
from servecap.ledger.serve import DEFAULT_BLOCK_SIZE_TOKENS, DEFAULT_MAX_NUM_BATCHED_TOKENS
from servecap.ledger.units import GiB
from servecap.ledger.vllm_log import LogFacts, parse_vllm_log
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import load_model
from servecap.model_configs.reading import read_bytes

from .deploy import NO_DEPLOY, DeployFlags, deploy_options, engine_spec, implied_engine
from .errors import handle_errors
from .inputs import PlanFlags, model_for_flags, serve_spec

MAX_LOG_BYTES = 512 * 2**20  # a startup log is kilobytes; a long-running one stays far below

Opt = typer.Option


@deploy_options
def reconcile_cmd(
    log: Annotated[Path, typer.Argument(help="A vLLM startup log (V0 or V1 engine).")],
    model: Annotated[str, Opt("--model", help="The model the log served: bundled name, YAML, "
                              "config.json or directory.")],
    device: Annotated[str | None, Opt(help="Device (catalog name or size). Default: the log's "
                                      "total_gpu_memory.")] = None,
    max_model_len: Annotated[int | None, Opt("--max-model-len", "--context",
                                             help="Default: the log's.")] = None,
    block_size: Annotated[int, Opt(help="vLLM --block-size.")] = DEFAULT_BLOCK_SIZE_TOKENS,
    kv_dtype: Annotated[str | None, Opt("--kv-cache-dtype", "--kv-dtype")] = None,
    max_num_batched_tokens: Annotated[int, Opt(help="Sizes the activation estimate.")]
    = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object.")] = False,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Plan the deployment a vLLM log came from and compare each figure: residual and advice.

    Give the flags the engine was started with (vLLM's own names). Example:

      servecap reconcile vllm.log --model llama-3.1-8b --device a100-40gb -tp 2
    """
    flags = PlanFlags(device=device, context=max_model_len, concurrency=1, block_size=block_size,
                      kv_dtype=kv_dtype, max_num_batched_tokens=max_num_batched_tokens)
    result = reconcile_log(log, model, flags, deploy)
    if as_json:
        print(json.dumps(to_dict(result, log), indent=2))
    else:
        render(result, log)


def reconcile_log(log: Path, model: str, flags: PlanFlags,
                  deploy: DeployFlags = NO_DEPLOY) -> Reconciliation:
    """Parse, plan the same deployment twice (from the config; with the log's measured lines),
    check it is the same model, and compare."""
    if implied_engine(deploy) not in (PLAIN, VLLM):
        raise SpecError("--engine", deploy.engine, "reconcile reads vLLM logs: vllm (the "
                        "default here)")
    facts = parse_vllm_log(_read(log), str(log))
    loaded = load_model(model)
    flags = replace(flags, device=flags.device or _logged_device(facts),
                    context=flags.context or facts.max_model_len)
    util = deploy.gpu_memory_utilization or facts.gpu_memory_utilization
    engine = replace(engine_spec(replace(deploy, engine="vllm", gpu_memory_utilization=util)),
                     formula=facts.engine_version)
    spec, serve = model_for_flags(flags, loaded), serve_spec(flags, loaded)
    parallel = Parallel(deploy.tensor_parallel_size, deploy.pipeline_parallel_size)
    plan = build_deployment(spec, serve, Overrides(), parallel, engine).plan
    check_same_model(plan, facts, spec.name)
    measured = _measured(facts)
    replanned = build_deployment(
        spec, replace(serve, runtime_peak_bytes=facts.gib_bytes("activation_peak_gib")
                      if facts.activation_peak_gib is not None else serve.runtime_peak_bytes),
        measured, parallel,
        replace(engine, non_torch_bytes=facts.gib_bytes("non_torch_gib") or engine.non_torch_bytes,
                cuda_graph_bytes=facts.gib_bytes("cuda_graph_gib") or engine.cuda_graph_bytes)
    ).plan
    return reconcile(plan, replanned, facts)


def _read(log: Path) -> str:
    """A regular file of at most MAX_LOG_BYTES (never /dev/zero or a pipe); bad bytes replaced."""
    return read_bytes(log, MAX_LOG_BYTES, "log").decode("utf-8", errors="replace")


def _logged_device(facts: LogFacts) -> str:
    if facts.total_gpu_gib is None:
        raise SpecError("--device", None, "the log does not print total_gpu_memory: give the "
                        "device (catalog name or size)")
    return f"{facts.total_gpu_gib}GiB"


def _measured(facts: LogFacts) -> Overrides:
    if facts.weights_gib is None:
        return Overrides()
    return Overrides(weights=WeightBytes(facts.gib_bytes("weights_gib"), 0, 0, 0, ""),
                     weights_source="measured: the log", per_device=True)


def _cell(value: float, unit: str) -> str:
    if unit == "GiB":
        text = f"{value / GiB:,.2f} GiB"
    else:
        text = f"{value:,.2f}x" if unit == "x" else f"{value:,.0f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,GiBx ") else text


def render(result: Reconciliation, log: Path) -> None:
    """Predicted vs logged per line (rich is loaded only here, not for --json)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"{log.name} (vLLM {result.engine_version.upper()}) vs the plan for "
                  f"{result.model}", title_justify="left")
    for column in ("line", "predicted", "logged", "residual", "advice"):
        table.add_column(column, justify="left" if column in ("line", "advice") else "right",
                         overflow="fold")
    for row in result.rows:
        residual = _cell(row.residual, row.unit)
        table.add_row(row.label, _cell(row.predicted, row.unit), _cell(row.logged, row.unit),
                      residual if residual.startswith("-") else "+" + residual, row.advice)
    console.print(table)
    for note in result.notes:
        console.print(f"note: {note}", style="yellow")


def to_dict(result: Reconciliation, log: Path) -> dict:
    """Memory rows in int bytes (unit 'bytes'); blocks and tokens ints; concurrency a float."""
    def number(value, unit):
        return float(value) if unit == "x" else int(round(value))
    rows = [{"key": r.key, "label": r.label, "unit": "bytes" if r.unit == "GiB" else r.unit,
             "predicted": number(r.predicted, r.unit), "logged": number(r.logged, r.unit),
             "residual": number(r.residual, r.unit), "advice": r.advice} for r in result.rows]
    return {"log": str(log), "model": result.model, "engine_version": result.engine_version,
            "rows": rows, "notes": list(result.notes)}


def register(app: typer.Typer) -> None:
    app.command("reconcile")(handle_errors(reconcile_cmd))
