"""`servecap verify`: run the plan on a device (or an emulated one) and reconcile every line."""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.devices import resolve_device
from servecap.ledger.errors import SpecError
from servecap.model_configs import load_model

from .errors import EXIT_DOES_NOT_FIT, fail, handle_errors
from .files import check_new, write_json
from .inputs import PlanFlags, serve_spec
from .verify_json import verify_to_dict
from .verify_view import render_verify, violation_summary
from .verify_xlsx import write_verified_workbook

Opt = typer.Option


@dataclass(frozen=True)
class VerifyFlags:
    device: str = "cpu"
    device_memory: str | None = None
    num_layers: int | None = None
    output_tokens: int = 16
    seed: int = 0
    weights: str | None = None
    workload: Path | None = None
    realtime: bool = False
    admission: str = "reserve"
    tensor_parallel_size: int = 1


def verify(
    model: Annotated[str, typer.Argument(help="Bundled model name, a model YAML, a config.json "
                                         "or a local model directory.")],
    device: Annotated[str, Opt(help="cpu, cuda or cuda:N.")] = "cpu",
    device_memory: Annotated[str | None, Opt(help="Emulate a device of this size (40GiB): "
                                             "CUDA by the per-process memory fraction, CPU as "
                                             "a cap the runtime enforces. Default: the model "
                                             "file's device, else the whole GPU.")] = None,
    context: Annotated[int | None, Opt("--context", "--max-model-len",
                                       help="Tokens per request.")] = None,
    concurrency: Annotated[int | None, Opt(help="Requests in the declared load.")] = None,
    runtime_peak: Annotated[str | None, Opt(help="Declared runtime peak budget, e.g. 3GiB.")]
    = None,
    safety: Annotated[str | None, Opt(help="Safety reserve: a size or a share (10%).")] = None,
    weight_dtype: Annotated[str | None, Opt(help="fp32, bf16, fp16.")] = None,
    kv_dtype: Annotated[str | None, Opt(help="KV cache dtype: fp32, bf16, fp16.")] = None,
    block_size: Annotated[int | None, Opt(help="Paged KV block size in tokens.")] = None,
    max_num_batched_tokens: Annotated[int, Opt(help="Tokens per forward pass.")] = 8192,
    max_num_seqs: Annotated[int, Opt(help="Most sequences in one step.")] = 256,
    num_layers: Annotated[int | None, Opt(help="Run a copy with only the first N layers; the "
                                          "ledger is scaled the same way.")] = None,
    output_tokens: Annotated[int, Opt(help="Output tokens of each request in the declared "
                                      "load (prompt = context - output).")] = 16,
    seed: Annotated[int, Opt(help="Seed for weights and prompts.")] = 0,
    weights: Annotated[str | None, Opt(help="Local safetensors directory (default: seeded "
                                       "random weights).")] = None,
    workload: Annotated[Path | None, Opt(help="The simulator's workload YAML as the load "
                                         "(default: concurrency requests of the context).")]
    = None,
    realtime: Annotated[bool, Opt(help="Add each workload request at its arrival time "
                                  "(default: all at once, as fast as possible).")] = False,
    admission: Annotated[str, Opt(help="reserve: admit only when blocks for the whole "
                                  "context are free (never preempts); optimistic: admit on the "
                                  "prompt's blocks, preempt by recompute when decode growth "
                                  "runs out (vLLM).")] = "reserve",
    tensor_parallel_size: Annotated[int, Opt(help="Ranks, one process each (gloo on the CPU, "
                                             "NCCL on CUDA: rank r on cuda:r); each reconciles "
                                             "its own shard.")] = 1,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object (integer bytes).")]
    = False,
    xlsx: Annotated[Path | None, Opt(help="Also write the capacity workbook with its "
                                     "Verification sheet filled.")] = None,
    force: Annotated[bool, Opt(help="Replace existing output files (--xlsx, "
                               "--calibration-out).")] = False,
    calibration_out: Annotated[Path | None, Opt(help="Write the iteration-time coefficients "
                                                "fitted to this run (JSON the simulator's "
                                                "--coefficients takes).")] = None,
) -> None:
    """Measure the plan on the device, line by line; exit 1 when a ledger line is violated.

    Runs the paged-KV runtime under the declared load and reconciles every ledger line
    (docs/verify.md). Examples:

      servecap verify tiny-llama --device cpu          # a 16 MiB device emulated on the CPU
      servecap verify llama-3.1-8b --device cuda:0 --context 4096 --concurrency 16
      servecap verify tiny-llama --device cpu --json --calibration-out coeffs.json
    """
    check_new(xlsx, force, "--xlsx")
    check_new(calibration_out, force, "--calibration-out")
    flags = PlanFlags(device_memory, context, concurrency, None, runtime_peak, safety,
                      weight_dtype, kv_dtype, None, block_size, 0, 128, max_num_batched_tokens,
                      max_num_seqs)
    result = verify_from_flags(model, flags, VerifyFlags(
        device, device_memory, num_layers, output_tokens, seed, weights, workload, realtime,
        admission, tensor_parallel_size))
    report = verify_to_dict(result)
    if xlsx is not None:
        write_verified_workbook(model, result.binding, report["lines"], xlsx, force)
    if calibration_out is not None:
        write_json(calibration_out, result.binding.calibration["coefficients"], force=True)
    print(json.dumps(report, indent=2)) if as_json else render_verify(result, Console())
    summary = violation_summary(result)
    if summary:  # said once, here: the table view leaves it to this line
        raise fail("violated: " + summary + _over_ceiling(result.binding.plan),
                   EXIT_DOES_NOT_FIT)


def verify_from_flags(model: str, flags: PlanFlags, vflags: VerifyFlags):
    """Load, scale, plan against the (emulated) device, run and reconcile: the one call."""
    from servecap.runtime.model import with_num_layers
    from servecap.runtime.verify import ParallelResult, VerifyOptions, verify

    if vflags.output_tokens < 1:
        raise SpecError("--output-tokens", vflags.output_tokens, "must be >= 1 token")
    _check_where(vflags.device)
    if vflags.tensor_parallel_size < 1:
        raise SpecError("--tensor-parallel-size", vflags.tensor_parallel_size, "ranks, >= 1")
    loaded = load_model(model)
    spec = loaded.spec if vflags.num_layers is None else with_num_layers(loaded.spec,
                                                                         vflags.num_layers)
    size_text = vflags.device_memory or loaded.serving.device
    device_bytes = resolve_device(size_text, "--device-memory")[0] if size_text else None
    serve = serve_spec(PlanFlags(**{**flags.__dict__, "device": size_text or "1"}), loaded)
    _check_load(serve, vflags, spec.max_position_embeddings)
    workload, name = _workload(vflags.workload, spec.vocab_size)
    options = VerifyOptions(device=vflags.device, device_bytes=device_bytes, seed=vflags.seed,
                            output_tokens=vflags.output_tokens, weights_dir=vflags.weights,
                            config_path=str(loaded.path), workload=workload,
                            workload_name=name, realtime=vflags.realtime,
                            reserve_full_context=_reserve(vflags.admission))
    if vflags.tensor_parallel_size == 1:
        return ParallelResult((verify(spec, serve, options),))
    from servecap.runtime.verify_parallel import verify_parallel

    return verify_parallel(spec, serve, options, vflags.tensor_parallel_size)


def _reserve(admission: str) -> bool:
    if admission not in ("reserve", "optimistic"):
        raise SpecError("--admission", admission, "allowed: reserve, optimistic")
    return admission == "reserve"


def _workload(path: Path | None, vocab_size: int) -> tuple[tuple, str]:
    if path is None:
        return (), ""
    from servecap.runtime.workload import load_arrivals

    return load_arrivals(path, vocab_size)


def _over_ceiling(plan) -> str:
    """'; declared 20 > ceiling 15': the usual cause of a KV line past the pool."""
    declared = len(plan.serve.lengths) or plan.serve.concurrency
    ceiling = plan.memory_ceiling_requests
    return f"; declared {declared:,} > ceiling {ceiling:,}" if declared > ceiling else ""

def _check_where(device: str) -> None:
    """In plan --device is a size or catalog name; here it is where to run. Say so when a
    plan-style value is given, rather than a bare 'allowed: cpu, cuda'."""
    if re.fullmatch(r"cpu|cuda(:[0-9]+)?", device.strip().lower()):
        return
    try:
        resolve_device(device, "--device")
    except SpecError:
        return  # neither reading: the runtime's own error names what is allowed
    raise SpecError("--device", device, "in verify, --device is where to run (cpu, cuda, "
                    f"cuda:N); the device's memory goes in --device-memory, e.g. --device "
                    f"cuda --device-memory {device} (in plan, --device is that size)")

def _check_load(serve, vflags: VerifyFlags, max_position_embeddings: int) -> None:
    """Refuse what the runtime would otherwise build or cut silently: a context past the
    model's, and output that leaves no prompt."""
    if max_position_embeddings and serve.context_tokens > max_position_embeddings:
        raise SpecError("--context", serve.context_tokens, f"at most the model's "
                        f"max_position_embeddings ({max_position_embeddings:,})")
    if vflags.workload is None and vflags.output_tokens >= serve.context_tokens:
        raise SpecError("--output-tokens", vflags.output_tokens, f"fewer than the context "
                        f"({serve.context_tokens:,} tokens): the prompt needs at least one")


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(verify))
