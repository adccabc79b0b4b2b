"""The typer options `simulate` and `sweep` share, declared once, each in its help panel."""

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_SAFETY_FRACTION,
)
from servecap.ledger.vllm_batch import seqs_default_rule, tokens_default_rule
from servecap.scenario.spec import DEFAULT as D
from servecap.scenario.steps import DEFAULT_POLICY_HELP
from servecap.sim.shape import DEFAULT_NUM_REQUESTS
from servecap.sim.sizing import DEFAULT_FLOOR_REQUESTS

from .scenario_opts import DEVICE_REQUIRED, DEVICE_REQUIRED_BY_MODEL

Opt = typer.Option
MODEL, DEPLOYMENT, ENGINE = "Model and device", "Deployment", "Engine (vLLM's knobs)"
STEPS, WORKLOAD, SPECULATIVE = "Step model", "Workload", "Speculative decoding"
SLO, OUTPUT = "SLOs", "Output"
Mod = functools.partial(Opt, rich_help_panel=MODEL)
Dep = functools.partial(Opt, rich_help_panel=DEPLOYMENT)
Eng = functools.partial(Opt, rich_help_panel=ENGINE)
Stp = functools.partial(Opt, rich_help_panel=STEPS)
Wkl = functools.partial(Opt, rich_help_panel=WORKLOAD)
Spc = functools.partial(Opt, rich_help_panel=SPECULATIVE)
Slo = functools.partial(Opt, rich_help_panel=SLO)
Out = functools.partial(Opt, rich_help_panel=OUTPUT)

Model = Annotated[str, typer.Argument(help="Bundled model name (servecap models), a model YAML, "
                                      "a config.json or a model directory.")]
OptionalModel = Annotated[str | None, typer.Argument(
    help="Bundled model name (servecap models), a model YAML, a config.json, a model directory "
    "or a Hub id; may come from --scenario instead.", show_default=False)]
_DEVICE = "Catalog name (h100-80gb: bandwidth and FLOPS known) or a size (80GiB) with " \
    "--bandwidth and --flops. "
Device = Annotated[str | None, Mod(help=_DEVICE + DEVICE_REQUIRED)]
PrefixDevice = Annotated[str | None, Mod(help=_DEVICE + DEVICE_REQUIRED_BY_MODEL)]  # no --scenario
Bandwidth = Annotated[str | None, Mod(help="Memory bandwidth, e.g. 2000GB/s (decimal, as vendors "
                                      "state it). Overrides the catalog.")]
Flops = Annotated[str | None, Mod(help="Dense BF16 compute, e.g. 990TFLOPS.")]
StepOverhead = Annotated[str, Stp(help="Fixed cost of every iteration (launch, sampling, "
                                  "scheduling), e.g. 2ms; 0 allowed.")]
CoefficientsFile = Annotated[Path | None, Stp(
    "--coefficients", help="JSON object of measured coefficients replacing the roofline's, "
    "keyed as in the `coefficients` block of --json output (that block itself is accepted).")]
Workload = Annotated[Path | None, Wkl(help="Workload YAML (arrivals, lengths, prefix groups, "
                                      "seed); the repository's workloads/chat.yaml is an example, "
                                      "workloads/README.md the format.")]
Trace = Annotated[Path | None, Wkl(help="CSV trace with header arrival_s,prompt_tokens,"
                                   "output_tokens (instead of --workload), or a .jsonl of "
                                   "token ids whose shared prefixes are cached "
                                   "(docs/prefix.md).")]
Policy = Annotated[list[str] | None, Wkl(
    "--policy", help="static, continuous, prefill-priority, decode-priority, chunked-prefill. "
    "Repeat to compare side by side. Default: " + DEFAULT_POLICY_HELP + ".",
    show_default=False)]
Context = Annotated[int | None, Mod("--max-model-len", "--context",
                                    help="Context the runtime peak is planned for. Default: "
                                    "the model's.")]
WeightDtype = Annotated[str | None, Mod(help="bf16, fp16, fp8, int8, int4, fp4. Default: the "
                                        "checkpoint's.")]
KvDtype = Annotated[str | None, Mod("--kv-dtype", "--kv-cache-dtype", help="KV cache dtype: "
                                    "bf16, fp16, fp8, int8, int4 (vLLM's name is "
                                    "--kv-cache-dtype). Default: the model dtype (vLLM's "
                                    "auto).")]
BlockSize = Annotated[int, Eng(help="Paged KV block size in tokens.")]
MaxBatched = Annotated[int | None, Eng(
    help="Token budget per iteration (chunked prefill chunk limit). Default: the simulated "
    "vLLM release's own for the device and entrypoint (V1 server: " + tokens_default_rule()
    + f"), {DEFAULT_MAX_NUM_BATCHED_TOKENS:,} with --engine plain.", show_default=False)]
MaxSeqs = Annotated[int | None, Eng(
    help="Sequences resident at once. Default: the simulated vLLM release's own (V1: "
    + seqs_default_rule() + f"), {DEFAULT_MAX_NUM_SEQS:,} with --engine plain.",
    show_default=False)]
Watermark = Annotated[float, Eng(help="Share of KV blocks kept free at admission.")]
Preemption = Annotated[str, Eng(help="recompute or swap (priced at 25 GB/s unless a "
                                "coefficients file says otherwise).")]
PrefixCaching = Annotated[bool, Eng("--prefix-caching/--no-prefix-caching",
                                    help="Share full blocks of a prefix group's prompt.")]
SloTtft = Annotated[str | None, Slo(help="TTFT target, e.g. 500ms.")]
SloItl = Annotated[str | None, Slo("--slo-tpot", "--slo-itl",
                                   help="TPOT target: each request's mean token gap must meet "
                                   "it, e.g. 50ms (--slo-itl is the older name).")]
Percentiles = Annotated[str | None, Slo(help="Latency percentiles to add to the tables and "
                                        "JSON, with the max, e.g. 50,90,99,99.9 (as vllm "
                                        "bench serve --metric-percentiles).")]
SloE2e = Annotated[str | None, Slo(help="End-to-end latency target, e.g. 30s.")]
Json = Annotated[bool, Out("--json", help="Print one JSON object.")]
Verbose = Annotated[bool, Out("--verbose", "-v", help="Say what was read from the Hugging Face "
                              "Hub: each file, its bytes, network or cache (stderr).")]
Replicas = Annotated[int, Dep(help="Identical devices behind the router.")]
Router = Annotated[str, Dep(help="round-robin, least-requests or least-tokens (outstanding "
                            "prompt + output tokens).")]
Disaggregate = Annotated[str | None, Dep(help="Separate prefill:decode device pools, e.g. 1:1; "
                                         "a colocated run on as many devices is shown "
                                         "beside it.")]
KvTransfer = Annotated[str, Dep(help="KV link between prefill and decode pools, e.g. "
                                "50GB/s.")]
RuntimePeak = Annotated[str | None, Eng(help="Measured runtime peak, e.g. 3GiB (sizes the KV "
                                         "pool). Default: the ledger's estimate.")]
Safety = Annotated[str | None, Eng(help="Safety reserve: a size (4GiB) or a share of the device "
                                    f"(10%). Default {DEFAULT_SAFETY_FRACTION:.0%}, or the "
                                    "model file's serving.safety.")]
NumGpuBlocks = Annotated[int | None, Eng(help="Cap the KV pool at this many blocks (vLLM "
                                         "num_gpu_blocks_override). Default: every block the "
                                         "ledger leaves.")]
KvOffloadingSize = Annotated[float | None, Eng(help="vLLM --kv-offloading-size: a host KV tier "
                                              "of this many GiB over the tp x pp ranks; a "
                                              "prefix evicted from the GPU but held there "
                                              "loads back over the host link.")]
KvOffloadingBackend = Annotated[str | None, Eng(help="vLLM --kv-offloading-backend: native or "
                                                "lmcache. Default: native.")]
Draft = Annotated[str | None, Spc(help="Speculative decoding with this draft model (priced "
                                 "by its own roofline on the same device).")]
DraftLength = Annotated[int, Spc(help="Draft tokens per verification step (k).")]
Acceptance = Annotated[float, Spc(help="Probability each draft token is accepted (a).")]
SpeculateMaxBatch = Annotated[int | None, Spc(help="Decode plainly above this many running "
                                              "sequences (vLLM "
                                              "speculative_disable_by_batch_size). Default: "
                                              "speculate at every batch size.")]
Scheduling = Annotated[str, Eng(help="fcfs, or priority: waiting requests ordered by their "
                                "tenant's priority (workload `tenants`), then arrival.")]
Xlsx = Annotated[Path | None, Out(help="Also write a capacity workbook of the simulated "
                                  "device, its Latency record filled from this run.")]
TensorParallel = Annotated[int, Dep("--tensor-parallel-size", "-tp", "--tp", help="GPUs that shard "
                                    "each layer: the KV pool is the binding rank's (as `plan "
                                    "-tp`), every layer pays two all-reduces on the "
                                    "interconnect.")]
PipelineParallel = Annotated[int, Dep("--pipeline-parallel-size", "-pp", "--pp",
                                      help="GPUs that split the layers into stages, run in "
                                      "turn (one batch in flight: the bubble is not "
                                      "filled).")]
SpeedOfLight = Annotated[bool, Stp("--speed-of-light", help="Peak FLOPS and bandwidth with no "
                                   "overheads (the uncalibrated roofline) instead of the "
                                   "device's measured efficiency table; no engine terms "
                                   "either, unless --engine names a release.")]
Concurrency = Annotated[int | None, Wkl(help="Closed loop: N requests in flight, the next sent "
                                        "as one finishes (as `vllm bench serve "
                                        "--max-concurrency`); arrival times are ignored.")]
StepTimeCv = Annotated[float | None, Stp(help="Step-time spread (coefficient of variation, "
                                         "e.g. 0.05): each step's time is drawn around its "
                                         "mean, seeded by --seed. Default: the coefficients "
                                         "file's step_time_cv, else 0.")]
Seed = Annotated[int, Stp(help="Seed of the step-time draws.")]
ExpertParallel = Annotated[bool, Dep("--enable-expert-parallel", help="MoE: the -tp ranks hold "
                                     "whole experts (vLLM's flag); each MoE layer's all-reduce "
                                     "becomes an all-to-all of every token's top-k "
                                     "activations.")]
Force = Annotated[bool, Out("--force", help="Replace existing output files (--xlsx, --records, "
                               "--token-times).")]
XlsxForce = Annotated[bool, Out("--force", help="Replace an existing --xlsx file.")]
Rate = Annotated[float | None, Wkl("--rate", "--request-rate", help="Poisson arrivals at this "
                                   "many requests/s (as `vllm bench serve --request-rate`), "
                                   "replacing the workload's; a gamma workload keeps its CV.")]
SimNumRequests = Annotated[int | None, Wkl("--num-requests", "--num-prompts",
                                           help="Requests to simulate (as `vllm bench serve "
                                           "--num-prompts`), replacing the workload's count; "
                                           f"default {DEFAULT_NUM_REQUESTS:,} with "
                                           "--input-len.")]
CeilingRequests = Annotated[int | None, Wkl(help="Most requests one run may simulate "
                                            "(default: the workload's count). Each rate runs "
                                            "until steady state, sized by request lifetimes "
                                            f"from {DEFAULT_FLOOR_REQUESTS} requests up, "
                                            "doubling to this ceiling; a run that does not "
                                            "get there says so.")]
InputLen = Annotated[int | None, Wkl(help="Fixed prompt tokens per request: a workload without "
                                     "a YAML (with --output-len).")]
OutputLen = Annotated[int | None, Wkl(help="Fixed output tokens per request (with "
                                      "--input-len).")]
Seeds = Annotated[int, Stp("--seeds", help="Runs with step-time seeds --seed, +1, ...: a "
                           "step-time spread (--step-time-cv) is sampled over N draws, pooled "
                           "in the figures and their intervals.")]


def _engine_help(plain_with: str | None) -> str:
    """--engine's words; plain_with: the command's own flags that make the default plain."""
    return ("vLLM release whose scheduling to simulate, e.g. vllm==0.6.3, or plain for the "
            "device's roofline and efficiency tables alone: the release's host time per step "
            "and per sequence, CUDA-graph sizes, API server, scheduler (V0 prefills first, V1 "
            "chunks). Default: vllm, the newest release known"
            + (f" (plain with {plain_with})." if plain_with else "."))


Engine = Annotated[str | None, Eng("--engine", help=_engine_help(
    "--speed-of-light or --coefficients"), show_default=False)]
# cost and speculate take no --coefficients; prefix neither that nor --speed-of-light
RooflineEngine = Annotated[str | None, Eng("--engine", help=_engine_help("--speed-of-light"),
                                           show_default=False)]
PrefixEngine = Annotated[str | None, Eng("--engine", help=_engine_help(None),
                                         show_default=False)]
NumSchedulerSteps = Annotated[int, Eng(help="vLLM V0 multi-step scheduling (with --engine "
                                       "vllm<0.8): the scheduler runs once per this many "
                                       "decode steps; new prompts wait for the group.")]
EnforceEager = Annotated[bool, Eng("--enforce-eager", help="No CUDA graphs (vLLM's flag; "
                                   "not with --engine plain): every step pays the eager "
                                   "launch cost.")]
AsyncScheduling = Annotated[bool | None, Eng(
    "--async-scheduling/--no-async-scheduling", help="V1 (vllm>=0.10): the host schedules the "
    "next step while the GPU runs this one (vLLM's flag). Default: the release's own, on from "
    "vllm 0.14 (the engine line says which and why).", show_default=False)]


@dataclass(frozen=True)
class SimOptions:
    """The options simulate and sweep share (each in its panel), received as one value."""

    device: Device = None
    bandwidth: Bandwidth = None
    flops: Flops = None
    step_overhead: StepOverhead = D.simulator.step_overhead
    coefficients: CoefficientsFile = None
    workload: Workload = None
    context: Context = None
    weight_dtype: WeightDtype = None
    kv_dtype: KvDtype = None
    block_size: BlockSize = DEFAULT_BLOCK_SIZE_TOKENS
    max_num_batched_tokens: MaxBatched = None
    max_num_seqs: MaxSeqs = None
    watermark: Watermark = D.scheduler.watermark
    preemption: Preemption = D.scheduler.preemption_mode
    prefix_caching: PrefixCaching = D.scheduler.enable_prefix_caching
    slo_ttft: SloTtft = None
    slo_itl: SloItl = None
    slo_e2e: SloE2e = None
    percentiles: Percentiles = None
    replicas: Replicas = D.simulator.replicas
    router: Router = D.simulator.router
    disaggregate: Disaggregate = None
    kv_transfer: KvTransfer = D.simulator.kv_transfer
    runtime_peak: RuntimePeak = None
    safety: Safety = None
    num_gpu_blocks: NumGpuBlocks = None
    kv_offloading_size: KvOffloadingSize = None
    kv_offloading_backend: KvOffloadingBackend = None
    draft: Draft = None
    draft_length: DraftLength = D.speculative.num_speculative_tokens
    acceptance: Acceptance = D.speculative.acceptance
    speculate_max_batch: SpeculateMaxBatch = None
    scheduling: Scheduling = D.scheduler.scheduling_policy
    tensor_parallel_size: TensorParallel = 1
    pipeline_parallel_size: PipelineParallel = 1
    speed_of_light: SpeedOfLight = False
    concurrency: Concurrency = None
    step_time_cv: StepTimeCv = None
    seed: Seed = D.simulator.seed
    seeds: Seeds = D.simulator.seeds
    input_len: InputLen = None
    output_len: OutputLen = None
    expert_parallel: ExpertParallel = False
    engine: Engine = None
    num_scheduler_steps: NumSchedulerSteps = 1
    enforce_eager: EnforceEager = False
    async_scheduling: AsyncScheduling = None

    def values(self) -> dict:
        """The options as SimFlags' fields (seeds is the run's, not a flag of SimFlags)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "seeds"}
NO_SIM_OPTIONS = SimOptions()


@dataclass(frozen=True)
class RooflineOptions:
    """The device and step model (the release simulated included) cost and speculate price
    on: simulate's flags of the same names, each in its panel, received as one value."""

    device: Device = None
    bandwidth: Bandwidth = None
    flops: Flops = None
    step_overhead: StepOverhead = D.simulator.step_overhead
    tensor_parallel_size: TensorParallel = 1
    pipeline_parallel_size: PipelineParallel = 1
    speed_of_light: SpeedOfLight = False
    engine: RooflineEngine = None


NO_ROOFLINE = RooflineOptions()
