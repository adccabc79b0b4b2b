"""The workbook a plan's flags build (its source), and its Inputs sheet read back as flags."""

from dataclasses import asdict, replace
from pathlib import Path

from servecap.ledger import dtypes
from servecap.ledger.engines import as_cached, release_row
from servecap.scenario.deployment import deployment as plan_deployment
from servecap.scenario.deployment import load, replanner

from .deploy import NO_DEPLOY, DeployFlags, engine_spec
from .inputs import PlanFlags, plan_parts, plan_scenario


def flags_from_workbook(path: Path) -> tuple[str, PlanFlags, DeployFlags]:
    """The flags that plan the workbook's Inputs again; an edited runtime cell is declared."""
    from servecap.workbooks.readback import read_plan_inputs

    return flags_of_inputs(read_plan_inputs(path), path)


def flags_of_inputs(inputs, path: Path) -> tuple[str, PlanFlags, DeployFlags]:
    """flags_from_workbook of Inputs already read (a WorkbookPlan)."""
    from servecap.workbooks.readback import check_model_cells

    flags, deploy = PlanFlags(**inputs.flags), DeployFlags(**inputs.deploy)
    src = workbook_source(inputs.model_ref, flags, deploy)
    if src.plan().line("runtime_peak") != inputs.runtime_peak_bytes:
        flags = replace(flags, runtime_peak=str(inputs.runtime_peak_bytes))
        src = workbook_source(inputs.model_ref, flags, deploy)
    check_model_cells(inputs, src, path)
    return inputs.model_ref, flags, deploy


def workbook_source(model: str | None, flags: PlanFlags, deploy: DeployFlags = NO_DEPLOY):
    """The single-device plain plan (Ledger) and the deployment (Ranks) the flags describe; an
    engine's default block size is the workbook's block size, as plan uses it; the model as
    the engine's release caches it (ledger.engines.as_cached), as plan takes it; the Scenario
    they make, planned again at each of the Envelope's rows (replan)."""
    from servecap.workbooks.source import WorkbookSource

    spec, serve, overrides = plan_parts(model, flags)
    spec = as_cached(spec, release_row(engine_spec(deploy)))
    scenario = plan_scenario(model, flags, deploy)
    loaded = load(scenario)  # once: the deployment and the Envelope's rows plan it
    deployment = plan_deployment(scenario, loaded)
    # the engine's block size, EPLB and the KV offload tier (deployment flags) as plan uses them
    serve = replace(serve, block_size_tokens=deployment.plan.serve.block_size_tokens,
                    eplb=deployment.plan.serve.eplb,
                    kv_offload=deployment.plan.serve.kv_offload)
    wdtype = flags.weight_dtype and dtypes.lookup(flags.weight_dtype, "--weight-dtype").name
    ref = str(Path(model).resolve()) if Path(model).exists() else model
    return WorkbookSource(ref, spec, serve, overrides, wdtype, flags.group_size, deployment,
                          engine_spec(deploy), tuple(asdict(deploy).items()),
                          replanner(scenario, loaded))
