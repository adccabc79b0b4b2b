"""`servecap workbook`, plan --xlsx and --from-workbook: capacity workbooks, openpyxl lazily."""

import sys
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger import dtypes
from servecap.ledger.devices import resolve_device
from servecap.ledger.errors import SpecError
from servecap.scenario.spec import DEFAULT, Scenario, with_values

from .deploy import NO_DEPLOY, DeployFlags, deploy_options
from .errors import handle_errors
from .extras import EXCEL, need
from .files import announce
from .inputs import (
    PLAN_PATHS,
    PlanFlags,
    plan_flags_of,
    plan_scenario,
)
from .scenario_opts import DEVICE_REQUIRED, SaveScenario, ScenarioFile, merged, save
from .workbook_inputs import flags_from_workbook, workbook_source  # noqa: F401 (re-exported)
from .workbook_scenario import Recording

Opt = typer.Option


WORKBOOK_PATHS = {name: PLAN_PATHS[name] for name in (
    "model", "concurrency", "runtime_peak", "safety", "weight_dtype", "block_size",
    *(f.name for f in fields(DeployFlags)))} | {
    "device": ("device.name", "envelope.devices"),
    "context": ("scheduler.max_model_len", "envelope.contexts"),
    "kv_dtype": ("dtypes.kv_cache_dtype", "envelope.kv_dtypes")}


@deploy_options
def workbook(
    ctx: typer.Context,
    output: Annotated[Path, Opt("-o", "--output", help="The .xlsx file to write.")],
    model: Annotated[str | None, typer.Argument(
        help="Bundled model name, model YAML, config.json, model directory or a Hub id "
        "org/name; may come from --scenario instead.", show_default=False)] = None,
    device: Annotated[list[str] | None, Opt(help="Device (catalog name or size); repeat to "
                                            "compare. The first is the Ledger's. "
                                            + DEVICE_REQUIRED)] = None,
    context: Annotated[list[int] | None, Opt("--context", "--max-model-len",
                                             help="Tokens per request; repeat for the "
                                             "envelope. The first is the Ledger's. Default: "
                                             "the model's max_position_embeddings, beside "
                                             "the envelope's own ladder of contexts.")] = None,
    kv_dtype: Annotated[list[str] | None, Opt("--kv-dtype", "--kv-cache-dtype",
                                              help="KV dtype; repeat for the envelope.")] = None,
    concurrency: Annotated[int | None, Opt(help="Resident requests. Default 1.")] = None,
    runtime_peak: Annotated[str | None, Opt(help="Measured runtime peak, e.g. 3GiB.")] = None,
    safety: Annotated[str | None, Opt(help="Safety reserve: 4GiB or 10%.")] = None,
    weight_dtype: Annotated[str | None, Opt(help="bf16, fp16, fp8, int8, int4, fp4.")] = None,
    block_size: Annotated[int | None, Opt(help="Paged KV block size in tokens.")] = None,
    force: Annotated[bool, Opt("--force", help="Replace an existing output file.")] = False,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Write a capacity workbook: the ledger as live formulas, the envelope over devices x
    contexts x KV dtypes with a chart, and the review sheets.

    Repeat --device, --context and --kv-dtype for the envelope (docs/workbooks.md; a
    scenario's envelope section). Examples:

      servecap workbook llama-3.1-8b --device 40GiB --device 80GiB --context 4096 \\
          --context 32768 -o capacity.xlsx
      servecap workbook llama-3.1-70b-instruct --device h100-80gb -tp 4 --engine vllm -o 70b.xlsx
      servecap workbook --scenario chat.yaml -o chat.xlsx
    """
    devices, contexts, kv_dtypes = device or [], context or [], kv_dtype or []
    flags = PlanFlags(device=_head(devices), context=_head(contexts), concurrency=concurrency,
                      runtime_peak=runtime_peak, safety=safety, weight_dtype=weight_dtype,
                      kv_dtype=_head(kv_dtypes), block_size=block_size)
    built = with_values(plan_scenario(model, flags, deploy), {
        "envelope.devices": tuple(devices) or None, "envelope.contexts": tuple(contexts) or None,
        "envelope.kv_dtypes": tuple(kv_dtypes) or None})
    origins: dict[str, str] = {}
    scenario = merged(ctx, built, WORKBOOK_PATHS, scenario_file, origins=origins)
    model, flags, deploy = plan_flags_of(scenario)
    if model is None:
        raise SpecError("MODEL", None, "required: a model (or give it in --scenario FILE)")
    env = scenario.envelope
    path, plan = export_workbook(model, flags, (env.devices or (), env.contexts or (),
                                                env.kv_dtypes or ()), output, force, deploy,
                                 Recording(scenario, origins))
    save(scenario, save_scenario, plan)
    print(f"wrote {path}")


def export_workbook(model: str, flags: PlanFlags, sweep_flags: tuple, output: Path,
                    force: bool, deploy: DeployFlags = NO_DEPLOY,
                    recording: Recording | None = None):
    """The Ledger at the first device/context/KV dtype; the Envelope over all of them; the
    Scenario sheet with `recording`. The file written, and the binding rank's plan."""
    _need_excel()
    from servecap.workbooks.envelope import Sweep
    from servecap.workbooks.export import build_workbook, default_sweep, save_workbook

    src = workbook_source(model, flags, deploy)
    devices, contexts, kv_dtypes = sweep_flags
    base = default_sweep(src)
    plan = src.deployment.plan
    sweep = Sweep(
        tuple((label, _positive(size, "--device")) for size, label in (
            resolve_device(d, "--device") for d in devices)) or base.devices,
        tuple(_positive(c, "--context") for c in contexts) or base.contexts_tokens,
        tuple(dtypes.lookup(dtypes.or_auto(k, plan.serve.kv_dtype), "--kv-dtype",
                            dtypes.KV_DTYPES).name for k in kv_dtypes) or base.kv_dtypes)
    record = recording and recording.rows(plan, output)
    return (save_workbook(build_workbook(src, sweep, scenario=record), output, force,
                          "--output"), plan)


def plan_workbook_io(recording: Recording, from_workbook: Path | None, xlsx: Path | None,
                     force: bool, verbose: bool = False) -> Scenario:
    """plan's workbook options: read the scenario from one (its record, the Inputs edited
    since winning), and/or write the plan to one, its scenario recorded."""
    _need_excel()
    scenario = recording.scenario
    if from_workbook is not None:
        if plan_flags_of(scenario) != plan_flags_of(DEFAULT):
            raise SpecError("--from-workbook", str(from_workbook), "give the workbook alone: "
                            "MODEL and plan flags come from it (edit its Inputs sheet, or use "
                            "--scenario FILE.xlsx with flags beside it)")
        from .workbook_scenario import workbook_scenario

        read = workbook_scenario(from_workbook)
        if verbose:
            print("\n".join([f"scenario: {from_workbook}", *read.notes]), file=sys.stderr)
        scenario, recording = read.scenario, Recording(read.scenario, read.origins)
        from .file_errors import remember

        remember(from_workbook, read.origins, PLAN_PATHS, scenario)
    if xlsx is not None:
        from servecap.workbooks.export import build_workbook, save_workbook

        src = workbook_source(*plan_flags_of(scenario))
        record = recording.rows(src.deployment.plan, xlsx)
        announce(save_workbook(build_workbook(src, scenario=record), xlsx, force))
    return scenario


def _need_excel() -> None:
    need("a workbook", EXCEL)


def _head(values: list):
    return values[0] if values else None


def _positive(value: int, field: str) -> int:
    if value < 1:
        unit = "bytes" if field == "--device" else "tokens"
        raise SpecError(field, value, f"must be a whole number of {unit} >= 1")
    return value


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(workbook))
