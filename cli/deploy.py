"""Deployment flags (parallel sizes, engine knobs, measured lines) shared by plan/reconcile."""

import functools
from dataclasses import dataclass, replace
from typing import Annotated

import typer

from servecap.ledger.engines import PLAIN, VLLM, EngineSpec
from servecap.ledger.serve import DEFAULT_MAX_NUM_SEQS
from servecap.ledger.vllm_batch import SERVE, seqs_default_rule
from servecap.scenario import engine as scenario_engine
from servecap.scenario.engine import split_engine, with_device  # noqa: F401 (re-exported)
from servecap.scenario.spec import DEFAULT, Engine, Memory, Parallel, Scenario

from .option_groups import options_from

Opt = typer.Option
Par = functools.partial(Opt, rich_help_panel="Parallelism (one ledger per rank)")
Eng = functools.partial(Opt, rich_help_panel="Engine budget (the engine's own flag names)")
Mes = functools.partial(Opt, rich_help_panel="Measured lines (replace an estimate)")


def _utilization_defaults() -> str:
    """Each vLLM release's default gpu_memory_utilization as the release table holds it,
    '0.90; 0.92 from v0.20.0': the help states the table, never a figure of its own."""
    from servecap.ledger.vllm_versions import ROWS

    words, last = [], None
    for item in ROWS:
        if item.default_gpu_memory_utilization != last:
            last = item.default_gpu_memory_utilization
            words.append(f"{last:.2f}" + (f" from {item.tag}" if words else ""))
    return "; ".join(words)


def _sampler_help() -> str:
    """The samplers --sampler takes and each release's default as the release table holds it,
    'torch; triton from v0.17.1; flashinfer from v0.21.0'."""
    from servecap.ledger.vllm_profile import SAMPLERS
    from servecap.ledger.vllm_versions import ROWS

    words, last = [], None
    for item in ROWS:
        if item.sampler != last:
            last = item.sampler
            words.append(last + (f" from {item.tag}" if words else ""))
    return (f"vLLM: the sampler its V1 model runner profiles ({', '.join(SAMPLERS)}). "
            f"Default: the release's ({'; '.join(words)}); Model Runner V2 (from v0.22.0, by "
            "model: docs/releases.md) runs its own.")


@dataclass(frozen=True)
class DeployFlags:
    """The deployment flags as typed (vLLM's / SGLang's / TensorRT-LLM's own names)."""

    tensor_parallel_size: Annotated[int, Par("--tensor-parallel-size", "-tp", "--tp", help="GPUs "
                                             "that shard each layer.")] = 1
    pipeline_parallel_size: Annotated[int, Par("--pipeline-parallel-size", "-pp", "--pp",
                                               help="GPUs that split the layers into "
                                               "stages.")] = 1
    data_parallel_size: Annotated[int, Par("--data-parallel-size", "-dp", help="Replicas of "
                                           "the whole tp x pp group.")] = 1
    interconnect: Annotated[str | None, Par(help="How tensor-parallel GPUs are linked: pcie "
                                            "(or no P2P) or nvlink; sizes the collectives' "
                                            "buffers. Default: the catalog device's (PCIe for "
                                            "a bare size).")] = None
    nnodes: Annotated[int, Par("--nnodes", help="vLLM, SGLang: nodes one replica's tp x pp GPUs "
                               "span; a tensor-parallel group across nodes sets up no "
                               "NVLink buffers.")] = 1
    enable_expert_parallel: Annotated[bool, Par("--enable-expert-parallel", help="vLLM: "
                                                "experts split over tp x dp ranks.")] = False
    enable_eplb: Annotated[bool, Par("--enable-eplb", help="vLLM: expert-parallel load "
                                     "balancing (redundant experts, its tables).")] = False
    num_redundant_experts: Annotated[int, Par(help="vLLM --eplb-config's: extra expert "
                                              "copies spread over the tp x dp ranks.")] = 0
    eplb_window_size: Annotated[int | None, Par(help="vLLM --eplb-config's: steps of expert "
                                                "load kept. Default: vLLM's.")] = None
    engine: Annotated[str, Eng(help="Budget semantics: plain (the ledger alone), vllm, sglang, "
                               "trtllm. vLLM takes a release: vllm==0.11, vllm>=0.21 (bare "
                               "vllm: the newest rules known).")] = PLAIN
    gpu_memory_utilization: Annotated[float | None, Eng(help="vLLM: fraction of TOTAL device "
                                                        "memory it may use. Default: the "
                                                        "release's (" + _utilization_defaults()
                                                        + ").")] = None
    kv_cache_memory: Annotated[str | None, Eng("--kv-cache-memory", "--kv-cache-memory-bytes",
                                               help="vLLM: KV pool size per GPU; overrides the "
                                               "utilization budget.")] = None
    mem_fraction_static: Annotated[float | None, Eng(help="SGLang: (weights + KV pool) / memory "
                                                     "free at start.")] = None
    free_gpu_memory_fraction: Annotated[float | None, Eng(help="TensorRT-LLM: fraction of the "
                                                          "memory free after weights.")] = None
    max_tokens: Annotated[int | None, Eng("--max-tokens", help="TensorRT-LLM: KvCacheConfig."
                                          "max_tokens, a cap on the pool's tokens (whole "
                                          "blocks); with the fraction, the smaller "
                                          "holds.")] = None
    max_total_tokens: Annotated[int | None, Eng("--max-total-tokens", help="SGLang: a cap on "
                                                "the pool's tokens (whole pages); the "
                                                "smaller of it and the profiled pool "
                                                "holds.")] = None
    max_num_seqs: Annotated[int | None, Eng("--max-num-seqs", help="Sequences per step: the "
                                            "runtime-peak estimate's decode rows, default "
                                            f"{DEFAULT_MAX_NUM_SEQS}; vLLM: those its sampler "
                                            "is profiled with, default the release's ("
                                            + seqs_default_rule() + ").")] = None
    entrypoint: Annotated[str, Eng(help="vLLM: started as `vllm serve` (serve) or through "
                                   "the LLM class (llm, e.g. lm_eval): sets its default "
                                   "batch.")] = SERVE
    mxfp4_backend: Annotated[str | None, Eng(help="vLLM: MXFP4 MoE kernel (marlin, triton, "
                                             "flashinfer). Default: flashinfer on GPUs with "
                                             "FP4, else marlin.")] = None
    sampler: Annotated[str | None, Eng(help=_sampler_help())] = None
    cold_compile: Annotated[bool, Eng("--cold-compile", help="vLLM: the start compiles "
                                      "torch.compile's graphs cold (no compile cache, e.g. a "
                                      "fresh container): from 0.11.1 Inductor benchmarks the "
                                      "embedding gather on a random copy of the table inside "
                                      "the profile, which vLLM charges as activation. Default: "
                                      "a warm cache, the steady state.")] = False
    enforce_eager: Annotated[bool, Eng("--enforce-eager", help="vLLM: no CUDA graphs (its "
                                       "flag): none captured, none subtracted from the "
                                       "pool.")] = False
    kv_offloading_size: Annotated[float | None, Eng(help="vLLM: a host-memory KV tier of this "
                                                    "many GiB, summed over the tp x pp ranks "
                                                    "(a host line, not device memory).")] = None
    kv_offloading_backend: Annotated[str | None, Eng(help="vLLM: native (its CPU offloading) or "
                                                     "lmcache (LMCache's CPU tier, vLLM <= "
                                                     "0.19). Default: native.")] = None
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


deploy_options = options_from(DeployFlags, "deploy")  # the command receives them as deploy


def deploy_sections(flags: DeployFlags, memory: Memory = DEFAULT.memory):
    """The Scenario's engine, memory and parallel sections these flags describe, --max-num-seqs
    (a vLLM knob: given alone, it names vllm) and --interconnect (the device section's)."""
    name, version = split_engine(flags.engine)
    if name == PLAIN:
        name = None  # plain gives way to the one engine whose knobs were given
    if name is None and flags.max_num_seqs is not None:
        name = VLLM
    engine = Engine(name=name, version=version, entrypoint=flags.entrypoint,
                    mxfp4_backend=flags.mxfp4_backend, sampler=flags.sampler,
                    cold_compile=flags.cold_compile, enforce_eager=flags.enforce_eager)
    memory = replace(memory, gpu_memory_utilization=flags.gpu_memory_utilization,
                     kv_cache_memory_bytes=flags.kv_cache_memory,
                     mem_fraction_static=flags.mem_fraction_static,
                     free_gpu_memory_fraction=flags.free_gpu_memory_fraction,
                     max_tokens=flags.max_tokens, max_total_tokens=flags.max_total_tokens,
                     non_torch=flags.non_torch, weights=flags.weights,
                     comm_buffer=flags.comm_buffer, cuda_graph_memory=flags.cuda_graph_memory,
                     kv_offloading_size=flags.kv_offloading_size,
                     kv_offloading_backend=flags.kv_offloading_backend)
    parallel = Parallel(flags.tensor_parallel_size, flags.pipeline_parallel_size,
                        flags.data_parallel_size, flags.enable_expert_parallel,
                        flags.enable_eplb, flags.num_redundant_experts, flags.eplb_window_size,
                        nnodes=flags.nnodes)
    return engine, memory, parallel, flags.max_num_seqs, flags.interconnect


def _scenario(flags: DeployFlags) -> Scenario:
    engine, memory, parallel, seqs, _ = deploy_sections(flags)
    return replace(DEFAULT, engine=engine, memory=memory, parallel=parallel,
                   scheduler=replace(DEFAULT.scheduler, max_num_seqs=seqs))


def engine_spec(flags: DeployFlags) -> EngineSpec:
    """The engine and its knobs (scenario/engine.py)."""
    return scenario_engine.engine_spec(_scenario(flags))


def implied_engine(flags: DeployFlags) -> str:
    """--engine as typed, any case; the default plain gives way to the one engine whose knobs
    were given."""
    return scenario_engine.implied_engine(_scenario(flags))
