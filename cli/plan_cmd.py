"""`servecap plan`: the per-device memory ledger and the memory-only concurrency ceiling."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Overrides, build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import LoadedModel, load_model

from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .inputs import PlanFlags, model_for_flags, serve_spec
from .plan_json import plan_to_dict
from .plan_view import render_plan

Opt = typer.Option


def plan(
    model: Annotated[str | None, typer.Argument(help="Bundled model name (servecap models), a "
                                                "model YAML, a config.json or a local model "
                                                "directory.")] = None,
    device: Annotated[str | None, Opt(help="Catalog name (h100-80gb) or size: 40GiB, 80GB, "
                                      "bytes.")] = None,
    context: Annotated[int | None, Opt("--context", "--max-model-len",
                                       help="Tokens per request (prompt + output). Default: "
                                       "the model's max_position_embeddings.")] = None,
    concurrency: Annotated[int | None, Opt(help="Resident requests. Default 1.")] = None,
    lengths: Annotated[str | None, Opt(help="Mixed batch of live lengths, e.g. 17,33,65 "
                                       "(instead of context x concurrency).")] = None,
    runtime_peak: Annotated[str | None, Opt(help="Measured runtime peak (activations, "
                                            "workspaces), e.g. 3GiB. Default: an estimate, "
                                            "labelled.")] = None,
    safety: Annotated[str | None, Opt(help="Safety reserve: a size (4GiB) or a share of the "
                                      "device (10%). Default 10%.")] = None,
    weight_dtype: Annotated[str | None, Opt(help="bf16, fp16, fp8, int8, int4, fp4. Default: "
                                            "the checkpoint's.")] = None,
    kv_dtype: Annotated[str | None, Opt(help="KV cache dtype: bf16, fp16, fp8, int8, int4.")]
    = None,
    activation_dtype: Annotated[str | None, Opt(help="bf16, fp16, fp8, int8.")] = None,
    block_size: Annotated[int | None, Opt(help="Paged KV block size in tokens (vLLM default "
                                          "16).")] = None,
    shared_prefix: Annotated[int, Opt(help="Tokens of prompt prefix shared by every request "
                                      "(full blocks stored once).")] = 0,
    group_size: Annotated[int, Opt(help="Quantization group size for --weight-dtype int4.")]
    = 128,
    max_num_batched_tokens: Annotated[int, Opt(help="Tokens per forward pass (sizes the "
                                               "runtime-peak estimate).")] = 8192,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object (integer bytes).")]
    = False,
    xlsx: Annotated[Path | None, Opt(help="Also write a capacity workbook with live formulas "
                                     "(needs the excel extra).")] = None,
    force: Annotated[bool, Opt("--force", help="Replace an existing --xlsx file.")] = False,
    from_workbook: Annotated[Path | None, Opt(help="Plan again from a workbook's Inputs sheet "
                                              "(instead of MODEL and flags).")] = None,
) -> None:
    """Build the per-device memory ledger and the memory-only concurrency ceiling.

    Exit 0 when the declared load fits, 1 when it does not, 2 for bad input.
    """
    flags = PlanFlags(device, context, concurrency, lengths, runtime_peak, safety, weight_dtype,
                      kv_dtype, activation_dtype, block_size, shared_prefix, group_size,
                      max_num_batched_tokens)
    if from_workbook is not None or xlsx is not None:
        from .workbook_cmd import plan_workbook_io  # openpyxl only when a workbook is involved

        result = plan_workbook_io(model, flags, from_workbook, xlsx, force)
    else:
        result = plan_from_flags(model, flags)
    if as_json:
        print(json.dumps(plan_to_dict(result), indent=2))
    else:
        render_plan(result, Console())
    if not result.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def plan_from_flags(model: str | None, flags: PlanFlags):
    """Load, build the ServeSpec, apply file-derived weights, and plan: the one call."""
    return build_plan(*plan_parts(model, flags))


def plan_parts(model: str | None, flags: PlanFlags) -> tuple[ModelSpec, ServeSpec, Overrides]:
    """What build_plan is called with: the model as flagged, the deployment, file weights."""
    if model is None:
        raise SpecError("MODEL", None, "required unless --from-workbook is given")
    loaded = load_model(model)
    return (model_for_flags(flags, loaded), serve_spec(flags, loaded),
            _file_overrides(loaded, flags))


def _file_overrides(loaded: LoadedModel, flags: PlanFlags) -> Overrides:
    """Safetensors headers give the weights exactly, unless a different dtype is asked for."""
    found = loaded.file_weights
    if found is None or flags.weight_dtype is not None:
        return Overrides()
    weights = WeightBytes(found.param_bytes, found.metadata_bytes, 0, 0, "")
    src = (f"safetensors headers: {found.num_tensors:,} tensors in {found.num_files} file(s)"
           if found.num_files else "model.safetensors.index.json metadata.total_size")
    return Overrides(weights=weights, weights_source=src)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(plan))
