"""`servecap plan`: the per-device memory ledger and the memory-only concurrency ceiling."""

import functools
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Overrides
from servecap.ledger.serve import ServeSpec
from servecap.ledger.vllm_start import advise, advise_after_pool, fails_after_pool, starts
from servecap.ledger.weights import WeightBytes, weight_bytes
from servecap.model_configs import LoadedModel, load_model

from .deploy import NO_DEPLOY, DeployFlags, deploy_options
from .deploy import deploy as plan_deployment
from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .inputs import PlanFlags, model_for_flags, serve_spec
from .plan_json import deployment_to_dict, source_to_dict

Opt = typer.Option
Dev = functools.partial(Opt, rich_help_panel="Device and load")
Led = functools.partial(Opt, rich_help_panel="Ledger lines")
Rep = functools.partial(Opt, rich_help_panel="Representations (dtypes)")
Out = functools.partial(Opt, rich_help_panel="Output")


@deploy_options
def plan(
    model: Annotated[str | None, typer.Argument(help="Bundled model name (servecap models), a "
                                                "model YAML, a config.json, a local model "
                                                "directory or a Hugging Face Hub id "
                                                "org/name[@revision].")] = None,
    device: Annotated[str | None, Dev(help="Catalog name (h100-80gb) or size: 40GiB, 80GB, "
                                      "bytes.")] = None,
    context: Annotated[int | None, Dev("--context", "--max-model-len",
                                       help="Tokens per request (prompt + output). Default: "
                                       "the model's max_position_embeddings.")] = None,
    concurrency: Annotated[int | None, Dev(help="Resident requests. Default 1.")] = None,
    lengths: Annotated[str | None, Dev(help="Mixed batch of live lengths, e.g. 17,33,65 "
                                       "(instead of context x concurrency).")] = None,
    runtime_peak: Annotated[str | None, Led(help="Measured runtime peak (activations, "
                                            "workspaces), e.g. 3GiB. Default: an estimate, "
                                            "labelled.")] = None,
    safety: Annotated[str | None, Led(help="Safety reserve: a size (4GiB) or a share of the "
                                      "device (10%). Default 10%.")] = None,
    weight_dtype: Annotated[str | None, Rep(help="bf16, fp16, fp8, int8, int4, fp4. Default: "
                                            "the checkpoint's.")] = None,
    kv_dtype: Annotated[str | None, Rep(help="KV cache dtype: bf16, fp16, fp8, int8, int4.")]
    = None,
    activation_dtype: Annotated[str | None, Rep(help="bf16, fp16, fp8, int8.")] = None,
    block_size: Annotated[int | None, Dev(help="Paged KV block size in tokens (vLLM default "
                                          "16).")] = None,
    shared_prefix: Annotated[int, Dev(help="Tokens of prompt prefix shared by every request "
                                      "(full blocks stored once).")] = 0,
    group_size: Annotated[int, Rep(help="int4 group size (0: per channel).")]
    = 128,
    max_num_batched_tokens: Annotated[int | None, Led(help="Tokens per forward pass (sizes the "
                                                      "runtime-peak estimate). Default 8192; "
                                                      "--engine vllm: the release's default "
                                                      "for this GPU.")] = None,
    as_json: Annotated[bool, Out("--json", help="Print one JSON object (integer bytes).")]
    = False,
    xlsx: Annotated[Path | None, Out(help="Also write a capacity workbook with live formulas "
                                     "(needs the excel extra).")] = None,
    force: Annotated[bool, Out("--force", help="Replace an existing --xlsx file.")] = False,
    from_workbook: Annotated[Path | None, Out(help="Plan again from a workbook's Inputs sheet "
                                              "(instead of MODEL and flags).")] = None,
    verbose: Annotated[bool, Out("--verbose", "-v", help="Say what was read from the Hugging "
                                 "Face Hub (each file, its bytes, network or cache) and which "
                                 "config.json fields were ignored as irrelevant to memory "
                                 "(stderr).")]
    = False,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Build the per-device memory ledger and the memory-only concurrency ceiling.

    Every line is integer bytes, shown in GiB (2^30 bytes); the "from" column says which inputs
    made it and marks estimates and measured values. Examples:

      servecap plan teaching-7b                # seed 000's 7B case: 39 requests
      servecap plan llama-3.1-8b --device 40GiB --context 4096 --concurrency 16
      servecap plan teaching-7b --device 80GiB --safety 10% --runtime-peak 0   # seed 004
      servecap plan ./model-dir --device h100-80gb --kv-dtype fp8 --json
      servecap plan llama-3.1-70b-instruct --device h100-80gb -tp 4 --engine vllm
      servecap plan Qwen/Qwen3-32B --device h100-80gb -v   # Hub id: reads only headers

    Exit 0 when the declared load fits, 1 when it does not, 2 for bad input.
    """
    flags = PlanFlags(device, context, concurrency, lengths, runtime_peak, safety, weight_dtype,
                      kv_dtype, activation_dtype, block_size, shared_prefix, group_size,
                      max_num_batched_tokens)
    if from_workbook is not None or xlsx is not None:
        from .workbook_cmd import plan_workbook_io  # openpyxl only when a workbook is involved

        model, flags, deploy = plan_workbook_io(model, flags, deploy, from_workbook, xlsx,
                                                force)
    loaded = _load(model)
    result = deployment_from_flags(model, flags, deploy, loaded)
    advice = None if starts(result) else start_advice(model, flags, deploy, loaded, result)
    if verbose:
        print_fetch_report(loaded.hub)
        print_ignored_fields(loaded)
    if as_json:
        extra = {"starts": advice is None, "start_advice": advice and {
            "max_model_len": advice.max_model_len,
            "gpu_memory_utilization": advice.gpu_memory_utilization,
            "max_num_seqs": advice.max_num_seqs, "text": advice.text}}
        print(json.dumps({**deployment_to_dict(result), **extra, **source_to_dict(loaded)},
                         indent=2))
    else:
        _render(result)
        if advice is not None:
            print(f"does not start: {advice.text}")
    if not result.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def start_advice(model: str | None, flags: PlanFlags, deploy: DeployFlags,
                 loaded: LoadedModel, result):
    """vLLM's own advice, each figure found by fit's search over this plan's own flags."""
    context = result.plan.serve.context_tokens
    util = deploy.gpu_memory_utilization or result.plan.budget and _default_util(deploy)

    def at_length(n: int):
        return deployment_from_flags(model, replace(flags, context=n), deploy, loaded)

    def at_utilization(u: float):
        return deployment_from_flags(model, flags, replace(deploy, gpu_memory_utilization=u),
                                     loaded)

    if fails_after_pool(result):
        def at_seqs(n: int):
            return deployment_from_flags(model, flags, replace(deploy, max_num_seqs=n), loaded)
        seqs = next(s.plan.after_pool.max_num_seqs for s in result.stages)
        return advise_after_pool(at_utilization, at_seqs, util or 1.0, seqs, result)
    return advise(at_length, at_utilization, context, util or 1.0)


def _default_util(deploy: DeployFlags) -> float:
    from .deploy import engine_spec

    return engine_spec(deploy).default_utilization


def print_fetch_report(hub) -> None:
    """-v of plan, simulate and verify: what was read from the Hub, on stderr (nothing for a
    bundled model or a local directory)."""
    if hub is not None:
        from servecap.model_configs.hub import fetch_report

        print("\n".join(fetch_report(hub)), file=sys.stderr)


def print_ignored_fields(loaded) -> None:
    """-v: the config.json fields no ledger line reads (router settings, time_step_limit, the
    vision tower ...), on stderr, so a reviewer sees what was left out and why."""
    if loaded.ignored_fields:
        print(f"ignored as irrelevant to memory ({len(loaded.ignored_fields)}): "
              + ", ".join(loaded.ignored_fields), file=sys.stderr)


def _render(result) -> None:
    """rich is loaded only to draw the table: --json never needs it."""
    from rich.console import Console

    from .deploy_view import render_deployment

    render_deployment(result, Console())


def plan_from_flags(model: str | None, flags: PlanFlags):
    """Load, build the ServeSpec, apply file-derived weights, and plan: the binding rank's."""
    return deployment_from_flags(model, flags).plan


def deployment_from_flags(model: str | None, flags: PlanFlags,
                          deploy: DeployFlags = NO_DEPLOY, loaded: LoadedModel | None = None):
    """Load (unless given), build the ServeSpec, apply file-derived weights, plan every rank."""
    loaded = loaded or _load(model)
    return plan_deployment(loaded, model_for_flags(flags, loaded), serve_spec(flags, loaded),
                           _file_overrides(loaded, flags), deploy, flags)


def deployment_parts(model: str, flags: PlanFlags, deploy: DeployFlags):
    """The model as flagged, its deployment with one resident request (what the simulator
    sizes its KV pool and prices its steps from: the same ledger plan prints) and where a Hub
    model was read from (None otherwise)."""
    loaded = _load(model)
    spec = model_for_flags(flags, loaded)
    serve = replace(serve_spec(flags, loaded), concurrency=1)
    return spec, plan_deployment(loaded, spec, serve, _file_overrides(loaded, flags), deploy,
                                 flags), loaded.hub


def plan_parts(model: str | None, flags: PlanFlags) -> tuple[ModelSpec, ServeSpec, Overrides]:
    """What build_plan is called with: the model as flagged, the deployment, file weights."""
    loaded = _load(model)
    return (model_for_flags(flags, loaded), serve_spec(flags, loaded),
            _file_overrides(loaded, flags))


def _load(model: str | None) -> LoadedModel:
    if model is None:
        raise SpecError("MODEL", None, "required unless --from-workbook is given")
    return load_model(model)


def _file_overrides(loaded: LoadedModel, flags: PlanFlags) -> Overrides:
    """Safetensors headers give the weights exactly, unless a different dtype is asked for."""
    found = loaded.file_weights
    if found is None or flags.weight_dtype is not None:
        return Overrides()
    spec = loaded.spec  # the headers give bytes; the architecture gives the parameter counts
    counts = weight_bytes(spec, 16, spec.quant) if spec.has_architecture else None
    weights = WeightBytes(found.param_bytes, found.metadata_bytes,
                          counts.num_parameters if counts else 0,
                          counts.quantized_parameters if counts else 0, "")
    src = (f"safetensors headers: {found.num_tensors:,} tensors in {found.num_files} file(s)"
           if found.num_files else "model.safetensors.index.json metadata.total_size")
    return Overrides(weights=weights, weights_source=src)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(plan))
