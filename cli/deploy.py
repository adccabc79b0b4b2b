"""Deployment flags (parallel sizes, engine knobs, measured lines) shared by plan/reconcile."""

import functools
import inspect
import re
from dataclasses import dataclass, fields, replace
from typing import Annotated

import typer

from servecap.ledger.devices import find as find_device
from servecap.ledger.engines import DEFAULT_BLOCK_TOKENS, ENGINES, PLAIN, VLLM, EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Overrides
from servecap.ledger.ranks import Deployment, Parallel, build_deployment
from servecap.ledger.units import parse_size_flag
from servecap.ledger.vllm_profile import LLM, SAMPLERS, SERVE
from servecap.ledger.vllm_versions import KNOWN, choose
from servecap.ledger.vllm_weights import MXFP4_BACKENDS
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import LoadedModel

Opt = typer.Option
Par = functools.partial(Opt, rich_help_panel="Parallelism (one ledger per rank)")
Eng = functools.partial(Opt, rich_help_panel="Engine budget (the engine's own flag names)")
Mes = functools.partial(Opt, rich_help_panel="Measured lines (replace an estimate)")


@dataclass(frozen=True)
class DeployFlags:
    """The deployment flags as typed (vLLM's / SGLang's / TensorRT-LLM's own names)."""

    tensor_parallel_size: Annotated[int, Par("--tensor-parallel-size", "-tp", help="GPUs "
                                             "that shard each layer.")] = 1
    pipeline_parallel_size: Annotated[int, Par("--pipeline-parallel-size", "-pp", help="GPUs "
                                               "that split the layers into stages.")] = 1
    data_parallel_size: Annotated[int, Par("--data-parallel-size", "-dp", help="Replicas of "
                                           "the whole tp x pp group.")] = 1
    engine: Annotated[str, Eng(help="Budget semantics: plain (the seed ledger), vllm, sglang, "
                               "trtllm. vLLM takes a release: vllm==0.11, vllm>=0.21 (bare "
                               "vllm: the newest rules known).")] = PLAIN
    gpu_memory_utilization: Annotated[float | None, Eng(help="vLLM: fraction of TOTAL device "
                                                        "memory it may use (default 0.90).")] = None
    kv_cache_memory: Annotated[str | None, Eng("--kv-cache-memory", "--kv-cache-memory-bytes",
                                               help="vLLM: KV pool size per GPU; overrides the "
                                               "utilization budget.")] = None
    mem_fraction_static: Annotated[float | None, Eng(help="SGLang: (weights + KV pool) / memory "
                                                     "free at start.")] = None
    free_gpu_memory_fraction: Annotated[float | None, Eng(help="TensorRT-LLM: fraction of the "
                                                          "memory free after weights.")] = None
    max_num_seqs: Annotated[int | None, Eng("--max-num-seqs", help="vLLM: sequences its "
                                            "sampler is profiled with. Default: the release's "
                                            "(256, or 1024 on >= 70 GiB GPUs).")] = None
    entrypoint: Annotated[str, Eng(help="vLLM: started as `vllm serve` (serve) or through "
                                   "the LLM class (llm, e.g. lm_eval): sets its default "
                                   "batch.")] = SERVE
    mxfp4_backend: Annotated[str | None, Eng(help="vLLM: MXFP4 MoE kernel (marlin, triton, "
                                             "flashinfer). Default: flashinfer on GPUs with "
                                             "FP4, else marlin.")] = None
    sampler: Annotated[str | None, Eng(help="vLLM: the sampler its profile runs: flashinfer "
                                       "or torch. Default: flashinfer where the release "
                                       "requires it (>= 0.12), else torch.")] = None
    non_torch: Annotated[str | None, Mes(help="Measured memory outside torch's allocator, "
                                         "e.g. 0.35GiB.")] = None
    weights: Annotated[str | None, Mes(help="Measured weights per GPU, e.g. 14.99GiB (vLLM's "
                                       "'Model loading took').")] = None
    comm_buffer: Annotated[str | None, Mes(help="Communication buffers per GPU (NCCL, "
                                           "all-reduce). Default: an estimate growing with "
                                           "tp.")] = None
    cuda_graph_memory: Annotated[str | None, Mes(help="Measured CUDA graph pool per GPU "
                                                 "(vLLM's 'Graph capturing ... took').")] = None


NO_DEPLOY = DeployFlags()
ENGINE_KNOBS = {"gpu_memory_utilization": "vllm", "kv_cache_memory": "vllm",
                "mem_fraction_static": "sglang", "free_gpu_memory_fraction": "trtllm",
                "max_num_seqs": "vllm", "mxfp4_backend": "vllm", "sampler": "vllm"}


def deploy_options(command):
    """Append DeployFlags' options to `command`'s signature; it receives them as `deploy`."""
    names = [f.name for f in fields(DeployFlags)]

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        flags = DeployFlags(**{name: kwargs.pop(name) for name in names})
        return command(*args, deploy=flags, **kwargs)

    own = [p for p in inspect.signature(command).parameters.values() if p.name != "deploy"]
    hints = inspect.get_annotations(DeployFlags)
    extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                               annotation=hints[f.name]) for f in fields(DeployFlags)]
    wrapper.__signature__ = inspect.Signature(own + extra)
    del wrapper.__wrapped__
    return wrapper


def engine_spec(flags: DeployFlags) -> EngineSpec:
    """The engine and its knobs; a knob of another engine is an error, not silently ignored.
    Without --engine, one engine's knobs name it (--gpu-memory-utilization means vllm)."""
    name = implied_engine(flags)
    for knob, owner in ENGINE_KNOBS.items():
        if getattr(flags, knob) is not None and name != owner:
            raise SpecError("--" + knob.replace("_", "-"), getattr(flags, knob),
                            f"applies to --engine {owner} (got --engine {name})")
    return EngineSpec(
        name=name, gpu_memory_utilization=flags.gpu_memory_utilization,
        **_vllm_knobs(flags, name),
        kv_cache_memory_bytes=_vllm_size(flags.kv_cache_memory, "--kv-cache-memory"),
        mem_fraction_static=flags.mem_fraction_static,
        free_gpu_memory_fraction=flags.free_gpu_memory_fraction,
        non_torch_bytes=_size(flags.non_torch, "--non-torch"),
        comm_buffer_bytes=_size(flags.comm_buffer, "--comm-buffer"),
        cuda_graph_bytes=_size(flags.cuda_graph_memory, "--cuda-graph-memory"))


def measured_overrides(flags: DeployFlags, file_overrides: Overrides) -> Overrides:
    """--weights replaces the weights line (per GPU, as engines log it)."""
    size = _size(flags.weights, "--weights")
    if size is None:
        return file_overrides
    return Overrides(weights=WeightBytes(size, 0, 0, 0, ""),
                     weights_source="measured: --weights (values and metadata together)",
                     per_device=True)


def deploy(loaded: LoadedModel, spec, serve, overrides: Overrides, flags: DeployFlags,
           plan_flags) -> Deployment:
    """Plan every rank of the deployment with the engine's semantics."""
    engine = engine_spec(flags)
    if engine.name != PLAIN and plan_flags.safety is not None:
        raise SpecError("--safety", plan_flags.safety, f"applies to --engine plain; "
                        f"{engine.name} keeps its own headroom (see its fraction flag)")
    if engine.name != PLAIN and plan_flags.block_size is None and \
            loaded.serving.block_size is None:
        serve = replace(serve, block_size_tokens=DEFAULT_BLOCK_TOKENS[engine.name])
    if engine.name == VLLM:
        engine = with_device(engine, plan_flags.device or loaded.serving.device,
                             getattr(plan_flags, "max_num_batched_tokens", None))
    parallel = Parallel(flags.tensor_parallel_size, flags.pipeline_parallel_size,
                        flags.data_parallel_size)
    return build_deployment(spec, serve, measured_overrides(flags, overrides), parallel, engine)


def with_device(engine: EngineSpec, device: str | None, batched_tokens: int | None):
    """The device's FP4 support (which MXFP4 kernel vLLM picks) and a declared batch."""
    found = find_device(device) if device else None
    return replace(engine, native_fp4=bool(found and found.fp4_flops_per_s),
                   max_num_batched_tokens=batched_tokens)


def implied_engine(flags: DeployFlags) -> str:
    """--engine as typed, any case ('VLLM' is vllm, 'vllm==0.11' is vllm); the default plain
    gives way to the one engine whose knobs were given."""
    name = engine_name(flags.engine)
    owners = {owner for knob, owner in ENGINE_KNOBS.items() if getattr(flags, knob) is not None}
    return owners.pop() if name == PLAIN and len(owners) == 1 else name


def engine_name(text: str) -> str:
    """The engine a spelling names: 'vllm>=0.21' -> vllm; anything else must be a name."""
    name = str(text).strip().lower()
    if name.startswith(VLLM) and name != VLLM:
        return VLLM
    if name not in ENGINES:
        raise SpecError("--engine", text, "allowed: " + ", ".join(ENGINES) + " (vllm==X.Y "
                        "picks a vLLM release)")
    return name


def _vllm_knobs(flags: DeployFlags, name: str) -> dict:
    """The vLLM row --engine picked (bare: the newest, said so) and its own knobs."""
    if name != VLLM:
        return {}
    text = str(flags.engine).strip().lower()
    choice = choose(text if text.startswith(VLLM) else VLLM)
    if flags.entrypoint not in (SERVE, LLM):
        raise SpecError("--entrypoint", flags.entrypoint, f"{SERVE} or {LLM}")
    if flags.mxfp4_backend is not None and flags.mxfp4_backend not in MXFP4_BACKENDS:
        raise SpecError("--mxfp4-backend", flags.mxfp4_backend, ", ".join(MXFP4_BACKENDS))
    if flags.sampler is not None and flags.sampler not in SAMPLERS:
        raise SpecError("--sampler", flags.sampler, ", ".join(SAMPLERS))
    if flags.max_num_seqs is not None and flags.max_num_seqs < 1:
        raise SpecError("--max-num-seqs", flags.max_num_seqs, "a whole number >= 1")
    return {"vllm_row": choice.row, "version_note": choice.note or f"vLLM rules: "
            f"{choice.row.name} ({choice.row.tag}); {KNOWN}", "entrypoint": flags.entrypoint,
            "max_num_seqs": flags.max_num_seqs, "mxfp4_backend": flags.mxfp4_backend,
            "sampler": flags.sampler}


def _vllm_size(text: str | None, field: str) -> int | None:
    """vLLM's human_readable_int too: '20G' = 20 x 2**30, '20g' = 20 x 10**9 ('K'/'k' ...)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)([kKmMgGtT])\s*", text or "")
    if not match:
        return _size(text, field)
    power = "kmgt".index(match.group(2).lower()) + 1
    base = 1024 if match.group(2).isupper() else 1000
    return int(float(match.group(1)) * base**power)


def _size(text: str | None, field: str) -> int | None:
    return None if text is None else parse_size_flag(text, field)
