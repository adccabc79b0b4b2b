"""`servecap reconcile`: a vLLM startup log beside the plan of the same deployment."""

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.engines import PLAIN, VLLM, EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Overrides
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.reconcile import Reconciliation, check_same_model, reconcile
from servecap.ledger.serve import DEFAULT_BLOCK_SIZE_TOKENS
from servecap.ledger.units import GiB
from servecap.ledger.vllm_log import LogFacts, parse_vllm_log
from servecap.ledger.vllm_versions import choose
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import load_model
from servecap.model_configs.reading import read_bytes

from .deploy import NO_DEPLOY, DeployFlags, deploy_options, engine_spec, implied_engine, with_device
from .errors import EXIT_DOES_NOT_FIT, handle_errors
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
    max_num_batched_tokens: Annotated[int | None, Opt(help="Tokens of vLLM's profile pass. "
                                                      "Default: the log's, else the "
                                                      "release's.")] = None,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object.")] = False,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Plan the deployment a vLLM log came from and compare each figure: residual and advice.

    The rules are the log's vLLM release (the nearest known, said so), or --engine vllm==X.
    Give the flags the engine was started with (vLLM's own names) where the log does not
    print them. Every memory line of the log is listed with what was read from it. Exit 0
    when the plan agrees (same start verdict, KV within 5%), 1 when it does not. Example:

      servecap reconcile vllm.log --model llama-3.1-8b --device a100-40gb -tp 2
    """
    flags = PlanFlags(device=device, context=max_model_len, concurrency=1, block_size=block_size,
                      kv_dtype=kv_dtype, max_num_batched_tokens=max_num_batched_tokens)
    result = reconcile_log(log, model, flags, deploy)
    if as_json:
        print(json.dumps(to_dict(result, log), indent=2))
    else:
        render(result, log)
    if not result.agrees:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


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
                    context=flags.context or facts.max_model_len,
                    kv_dtype=flags.kv_dtype or _kv_dtype(facts.kv_cache_dtype),
                    max_num_batched_tokens=flags.max_num_batched_tokens
                    or facts.max_num_batched_tokens)
    deploy, rules = _logged_deploy(deploy, facts)
    engine = with_device(engine_spec(deploy), flags.device, flags.max_num_batched_tokens)
    engine = replace(engine, formula=facts.engine_version, version_note="")
    spec, serve = model_for_flags(flags, loaded), serve_spec(flags, loaded)
    parallel = Parallel(deploy.tensor_parallel_size, deploy.pipeline_parallel_size)
    plan = build_deployment(spec, serve, Overrides(), parallel, engine).plan
    check_same_model(plan, facts, spec.name)
    replanned = build_deployment(
        spec, replace(serve, runtime_peak_bytes=facts.gib_bytes("activation_peak_gib")
                      if facts.activation_peak_gib is not None else serve.runtime_peak_bytes),
        _measured(facts), parallel, _measured_engine(engine, facts)).plan
    return reconcile(plan, replanned, facts, rules)


def _logged_deploy(deploy: DeployFlags, facts: LogFacts) -> tuple[DeployFlags, str]:
    """The log's release picks the rules unless --engine names one; the log's flags fill what
    was not given (tensor parallel size, utilization, batch, sampler, MXFP4 kernel)."""
    typed = str(deploy.engine).strip().lower()
    if typed.startswith(VLLM) and typed != VLLM:
        spelling, said = typed, "as --engine asked"
    elif facts.version:
        spelling, said = f"vllm=={facts.version}", f"the log's vLLM {facts.version}"
    elif facts.format_version:
        version, why = facts.format_version
        spelling, said = f"vllm=={version}", f"the log states no version; {why} is {version}'s"
    else:
        spelling, said = VLLM, "the log states no vLLM version: the newest known"
    choice = choose(spelling)
    rules = (f"rules: {choice.row.name} ({choice.row.tag}), {said}"
             + (f"; {choice.note}" if choice.note and spelling != VLLM else "")
             + ("; pin one with --engine vllm==X.Y" if spelling == VLLM else ""))
    logged = {
        "engine": choice.row.pin, "gpu_memory_utilization":
        deploy.gpu_memory_utilization or facts.gpu_memory_utilization,
        "tensor_parallel_size": facts.tensor_parallel_size or deploy.tensor_parallel_size
        if deploy.tensor_parallel_size == 1 else deploy.tensor_parallel_size,
        "max_num_seqs": deploy.max_num_seqs or facts.max_num_seqs,
        "mxfp4_backend": deploy.mxfp4_backend or facts.mxfp4_backend,
        "sampler": deploy.sampler or facts.sampler}
    return replace(deploy, **logged), rules


def _measured_engine(engine: EngineSpec, facts: LogFacts) -> EngineSpec:
    """The log's lines as measured: its non-torch figure already holds the collective buffers
    (vLLM profiles them as non-torch memory), and its CUDA-graph estimate moves the pool only
    in releases that subtract it."""
    logged_non_torch = facts.non_torch_gib is not None
    graphs = facts.cuda_graph_gib is not None and engine.vllm_row.graphs_subtracted
    return replace(engine, non_torch_bytes=facts.gib_bytes("non_torch_gib")
                   if logged_non_torch else engine.non_torch_bytes,
                   comm_buffer_bytes=0 if logged_non_torch else engine.comm_buffer_bytes,
                   cuda_graph_bytes=facts.gib_bytes("cuda_graph_gib")
                   if graphs else engine.cuda_graph_bytes)


def _kv_dtype(logged: str | None) -> str | None:
    """vLLM's 'auto' is the model's dtype; fp8_e4m3 / fp8_e5m2 are one byte, as fp8."""
    if logged in (None, "auto"):
        return None
    return "fp8" if logged.startswith("fp8") else logged


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
    if unit == "flag":
        return "yes" if value else "no"
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
    table = Table(title=f"{log.name} (vLLM {result.engine_version.upper()}) vs the plan for "
                  f"{result.model}", title_justify="left")
    for column in ("line", "predicted", "logged", "residual", "advice"):
        table.add_column(column, justify="left" if column in ("line", "advice") else "right",
                         overflow="fold")
    for row in result.rows:
        residual = "" if row.unit == "flag" else _cell(row.residual, row.unit)
        table.add_row(row.label, _cell(row.predicted, row.unit), _cell(row.logged, row.unit),
                      residual if residual.startswith("-") or not residual else "+" + residual,
                      row.advice)
    print_table(console, table)
    for note in result.notes:
        console.print(f"note: {note}", style="yellow")
    console.print(f"read {len(result.lines)} memory lines of the log:")
    for line in result.lines:
        console.print(f"  {line.number:>4}: {line.read or 'no vLLM figure'} | {line.text[:160]}",
                      highlight=False, markup=False)
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
