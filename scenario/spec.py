"""The Scenario: one frozen description of a deployment question, in vLLM's names where
servecap mirrors a vLLM knob. None means "not given: the default applies" (each default lives
where it is derived: scenario/deployment.py, the ledger, the engine's release rules).

The annotations are also the scenario file's schema: scenario/file.py validates a YAML mapping
into these dataclasses with pydantic (strict scalars, unknown keys refused, ranges checked)."""

from dataclasses import dataclass, field, fields, replace
from typing import Annotated

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from servecap.ledger.serve import DEFAULT_WATERMARK

_FORBID = ConfigDict(extra="forbid")


def _real(value):
    """A whole number is a float too (rate: 8); a bool or a string is not."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


Real = Annotated[StrictFloat, BeforeValidator(_real)]
Count = Annotated[StrictInt, Field(ge=1)]
Zero = Annotated[StrictInt, Field(ge=0)]
Fraction = Annotated[Real, Field(gt=0, le=1)]
Text = Annotated[StrictStr, Field(min_length=1, max_length=4096)]
Size = Text | Zero  # '40GiB', '10%' where a share is allowed, or a byte count


@dataclass(frozen=True)
class Model:
    """What to plan: a bundled name, a model YAML, a config.json, a model directory or a
    Hugging Face Hub id; revision pins a Hub commit, branch or tag (vLLM's --revision)."""

    __pydantic_config__ = _FORBID
    name: Text | None = None
    revision: Text | None = None

    @property
    def ref(self) -> str | None:
        """The reference model_configs.load_model reads: org/name@revision for a Hub id."""
        if self.name is None or self.revision is None:
            return self.name
        return f"{self.name}@{self.revision}"


@dataclass(frozen=True)
class Device:
    """A catalog name (h100-80gb) or a size; bandwidth and flops replace the catalog's rates
    (the simulator's); interconnect, how tensor-parallel peers are linked (pcie or nvlink;
    None: the catalog device's, PCIe for a bare size), sizes the collectives' buffers."""

    __pydantic_config__ = _FORBID
    name: Text | None = None
    bandwidth: Text | None = None
    flops: Text | None = None
    interconnect: Text | None = None


@dataclass(frozen=True)
class Engine:
    """Whose budget semantics apply (plain, vllm, sglang, trtllm; None: the engine the knobs
    name, else plain), the vLLM release ('0.11', '>=0.21'; None: the newest rules known) and
    vLLM's start-up choices."""

    __pydantic_config__ = _FORBID
    name: Text | None = None
    version: Text | None = None
    entrypoint: Text = "serve"
    mxfp4_backend: Text | None = None
    sampler: Text | None = None
    enforce_eager: StrictBool = False
    cold_compile: StrictBool = False


@dataclass(frozen=True)
class Parallel:
    """vLLM's parallel sizes: one ledger per rank; data parallel replicas multiply devices;
    nnodes, the nodes one replica's tp x pp ranks are spread over (vLLM's --nnodes).
    enable_eplb: vLLM's expert-parallel load balancing, num_redundant_experts and
    eplb_window_size its --eplb-config (None: vLLM's window, ledger/eplb.py)."""

    __pydantic_config__ = _FORBID
    tensor_parallel_size: Count = 1
    pipeline_parallel_size: Count = 1
    data_parallel_size: Count = 1
    enable_expert_parallel: StrictBool = False
    enable_eplb: StrictBool = False
    num_redundant_experts: Zero = 0
    eplb_window_size: Count | None = None
    nnodes: Count = 1


@dataclass(frozen=True)
class Dtypes:
    """Representations (None: the checkpoint's); an explicit weight dtype replaces the
    checkpoint's quantization with servecap's scheme for it (group_size for int4).
    kv_cache_dtype auto is None (vLLM's auto: the model dtype). dtype is the model dtype
    (vLLM's, SGLang's and TensorRT-LLM's --dtype): an unquantized checkpoint's weights, the
    activations and the KV cache follow it unless given their own (scenario/serving.py)."""

    __pydantic_config__ = _FORBID
    weight_dtype: Text | None = None
    kv_cache_dtype: Text | None = None
    activation_dtype: Text | None = None
    dtype: Text | None = None
    group_size: Zero = 128


@dataclass(frozen=True)
class Scheduler:
    """vLLM's scheduler knobs. max_model_len is the context planned per request (None: the
    model's max_position_embeddings); block_size and the batch limits None: the engine's or
    servecap's default; the simulator's admission watermark and preemption mode; vLLM V0's
    multi-step scheduling (num_scheduler_steps) and V1's async scheduling (None: the
    release's default, sim/vllm_releases.py), which the simulator runs with simulator.engine."""

    __pydantic_config__ = _FORBID
    max_model_len: Count | None = None
    block_size: Count | None = None
    max_num_seqs: Count | None = None
    max_num_batched_tokens: Count | None = None
    enable_prefix_caching: StrictBool = True
    enable_chunked_prefill: StrictBool | None = None
    scheduling_policy: Text = "fcfs"
    watermark: Annotated[Real, Field(ge=0, lt=1)] = DEFAULT_WATERMARK
    preemption_mode: Text = "recompute"
    num_scheduler_steps: Count = 1
    async_scheduling: StrictBool | None = None


@dataclass(frozen=True)
class Memory:
    """vLLM's, SGLang's and TensorRT-LLM's memory knobs (their names; max_tokens is
    TensorRT-LLM's KvCacheConfig.max_tokens, max_total_tokens SGLang's --max-total-tokens),
    servecap's plain safety reserve, and lines declared from measurement (each replaces an
    estimate). kv_offloading_size (GiB over the tp x pp ranks) and kv_offloading_backend
    (native, lmcache) are vLLM's host KV tier (ledger/kv_offload.py)."""

    __pydantic_config__ = _FORBID
    gpu_memory_utilization: Fraction | None = None
    kv_cache_memory_bytes: Size | None = None
    mem_fraction_static: Fraction | None = None
    free_gpu_memory_fraction: Fraction | None = None
    max_tokens: Count | None = None
    max_total_tokens: Count | None = None
    num_gpu_blocks_override: Count | None = None
    safety: Size | None = None
    runtime_peak: Size | None = None
    non_torch: Size | None = None
    weights: Size | None = None
    comm_buffer: Size | None = None
    cuda_graph_memory: Size | None = None
    kv_offloading_size: Real | None = None
    kv_offloading_backend: Text | None = None


@dataclass(frozen=True)
class Lora:
    """vLLM's LoRA knobs, its names: with enable_lora each rank holds max_loras adapter slots
    at max_lora_rank beside the weights, and max_cpu_loras adapters in host memory (None: vLLM's
    defaults, ledger/lora.py); lora_target_modules limits the modules wrapped (vLLM >= 0.19),
    lora_dtype their dtype (auto, float16, bfloat16; None: the model dtype)."""

    __pydantic_config__ = _FORBID
    enable_lora: StrictBool = False
    max_loras: Count | None = None
    max_lora_rank: Count | None = None
    max_cpu_loras: Count | None = None
    lora_target_modules: tuple[Text, ...] | None = None
    fully_sharded_loras: StrictBool = False
    lora_dtype: Text | None = None


@dataclass(frozen=True)
class Multimodal:
    """vLLM's multimodal knobs, its names: limit_mm_per_prompt ('{"image": 2, "video": 0}' or
    'image=2,video=0'; a modality not named allows 999), mm_processor_kwargs (JSON, e.g.
    '{"max_pixels": 1003520}'), mm_encoder_tp_mode (weights or data), skip_mm_profiling; and
    image_size, the load's images (WxH each), for the tokens each becomes. Any of them plans
    the encoder cache of a multimodal model (ledger/encoder.py)."""

    __pydantic_config__ = _FORBID
    limit_mm_per_prompt: Text | None = None
    mm_processor_kwargs: Text | None = None
    mm_encoder_tp_mode: Text | None = None
    skip_mm_profiling: StrictBool = False
    image_size: tuple[Text, ...] | None = None


@dataclass(frozen=True)
class Load:
    """The resident load a plan checks: concurrency requests of max_model_len tokens, or a
    mixed batch of live lengths; shared_prefix tokens of prompt are stored once."""

    __pydantic_config__ = _FORBID
    concurrency: Count | None = None
    lengths: tuple[Count, ...] | None = None
    shared_prefix: Zero = 0


@dataclass(frozen=True)
class Workload:
    """The traffic simulated or sent: a workload YAML, a CSV trace, or a fixed shape
    (input_len, output_len); rate and num_requests replace the file's (vllm bench serve's
    --request-rate, --num-prompts, --max-concurrency)."""

    __pydantic_config__ = _FORBID
    file: Text | None = None
    trace: Text | None = None
    rate: Annotated[Real, Field(gt=0)] | None = None
    num_requests: Count | None = None
    input_len: Count | None = None
    output_len: Count | None = None
    max_concurrency: Count | None = None


@dataclass(frozen=True)
class Slo:
    """Latency targets ('500ms', '2s'), the share of requests that must meet them, and the
    percentiles reported ('50,90,99')."""

    __pydantic_config__ = _FORBID
    ttft: Text | None = None
    tpot: Text | None = None
    e2e: Text | None = None
    target: Fraction = 0.9
    percentiles: Text | None = None


@dataclass(frozen=True)
class Prices:
    """What the hours cost: search's DEVICE=USD per GPU-hour (None: servecap's labelled price
    table), and cost's on-demand and reserved USD per GPU-hour, the share of hours in use and
    an API's USD per million output and input tokens to break even against."""

    __pydantic_config__ = _FORBID
    gpu_price: tuple[Text, ...] | None = None
    usd_per_gpu_hour: Annotated[Real, Field(gt=0)] = 2.0
    reserved_usd_per_gpu_hour: Annotated[Real, Field(gt=0)] | None = None
    utilization: Fraction = 1.0
    api_usd_per_million_output: Annotated[Real, Field(gt=0)] | None = None
    api_usd_per_million_input: Annotated[Real, Field(ge=0)] | None = None


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding (vLLM's --speculative-config): the draft model, the tokens it
    proposes per step, the acceptance rate assumed, and the batch size above which it stops."""

    __pydantic_config__ = _FORBID
    model: Text | None = None
    num_speculative_tokens: Count = 4
    acceptance: Annotated[Real, Field(ge=0, le=1)] = 0.7
    disable_by_batch_size: Count | None = None


@dataclass(frozen=True)
class Simulator:
    """How the simulator runs the question: the scheduler policies compared, the step model
    (a coefficients file, speed of light, a fixed overhead, a spread and its seeds) and the
    fleet (replicas behind a router, or disaggregated prefill:decode pools); a sweep's offered
    rates ('1,2,4'; None: num_rates evenly up to saturation); engine: the vLLM release whose
    scheduling and host costs the simulator runs ('vllm==0.6.3'; 'plain': none, the device's
    roofline alone; None: scenario/steps.py DEFAULT_ENGINE; the pool stays the ledger's,
    which engine.name sizes by a release's budget)."""

    __pydantic_config__ = _FORBID
    policies: tuple[Text, ...] = ("continuous",)
    step_overhead: Text = "0ms"
    coefficients: Text | None = None
    speed_of_light: StrictBool = False
    step_time_cv: Annotated[Real, Field(ge=0, lt=10)] | None = None
    seed: Zero = 0
    seeds: Count = 1
    replicas: Count = 1
    router: Text = "least-tokens"
    disaggregate: Text | None = None
    kv_transfer: Text = "50GB/s"
    engine: Text | None = None
    rates: Text | None = None
    num_rates: Count = 10


@dataclass(frozen=True)
class Search:
    """The space `servecap search` tries, each axis as a comma-separated list (devices by
    catalog name or unique prefix; None: every replica count --max-gpus allows, the
    checkpoint's dtypes), and whether it prunes by monotonicity and bisects capacities."""

    __pydantic_config__ = _FORBID
    devices: Text | None = None
    tensor_parallel_sizes: Text = "1,2,4,8"
    pipeline_parallel_sizes: Text = "1"
    replicas: Text | None = None
    weight_dtypes: Text | None = None
    kv_dtypes: Text | None = None
    max_num_seqs: Text = "128,256"
    max_num_batched_tokens: Text = "2048,8192"
    disaggregate: Text = "1:1,1:2,2:1"
    max_gpus: Count = 8
    policy: Text = "chunked-prefill"
    prune: StrictBool = True
    capacity: StrictBool = True


@dataclass(frozen=True)
class Envelope:
    """The axes `servecap workbook`'s Envelope sheet sweeps (None: the plan's device, the
    standard context ladder with the plan's context, the plan's KV dtype beside bf16 and fp8);
    its Ledger is planned at device.name, scheduler.max_model_len and dtypes.kv_cache_dtype."""

    __pydantic_config__ = _FORBID
    devices: tuple[Text, ...] | None = None
    contexts: tuple[Count, ...] | None = None
    kv_dtypes: tuple[Text, ...] | None = None


@dataclass(frozen=True)
class Runtime:
    """How `servecap verify` runs the question on a device: where (cpu, cuda, cuda:N), a copy
    with only the first num_layers, each declared request's output tokens, the seed of weights
    and prompts, a local safetensors folder (None: seeded random weights), arrivals in real
    time (None: with a workload or trace), admission (reserve or optimistic) and the ceiling
    probe."""

    __pydantic_config__ = _FORBID
    run_on: Text = "cpu"
    num_layers: Count | None = None
    output_tokens: Count = 16
    seed: Zero = 0
    weights: Text | None = None
    realtime: StrictBool | None = None
    admission: Text = "reserve"
    probe: StrictBool = True


@dataclass(frozen=True)
class Client:
    """How `servecap load` sends the workload to a server: the endpoint (completions or
    chat), a dataset of conversations sent as text instead of made-up prompts, turns per
    conversation and the pause between them, the output length of a dataset turn that gives
    none, the vocabulary prompt token ids are drawn from and their seed (and a dataset's
    --rate arrivals'), a request's timeout, the time after which no request starts, and the
    SLO capacity sweep (doubling rates, then bisected to sweep_tolerance of the capacity).
    The server's URL is not here: the same scenario is sent to whichever server is named."""

    __pydantic_config__ = _FORBID
    endpoint: Text = "completions"
    dataset: Text | None = None
    turns: Count | None = None
    think_time: Text = "0s"
    output_tokens: Count | None = None
    vocab_size: Count = 256
    seed: Zero = 0
    timeout: Text = "600s"
    duration: Text | None = None
    sweep: StrictBool = False
    sweep_tolerance: Annotated[Real, Field(gt=0, lt=1)] = 0.1  # real runs are noisy and
    # each costs seconds: bisect to 10 %


@dataclass(frozen=True)
class Server:
    """The OpenAI-compatible server `servecap serve` runs and `servecap load` talks to: the
    `model` clients send (None: serve names it MODEL as given; load asks /v1/models), the
    server's tokenizer (a tokenizer.json, its folder or, for load, a Hub id in the local
    cache), the waiting requests beyond which it answers 429, and its edge limits (None: the
    server's defaults, runtime/server/limits.py). Where it listens (host, port) and its API
    key are not here: a run's address, and a secret a file must not hold."""

    __pydantic_config__ = _FORBID
    served_model_name: Text | None = None
    tokenizer: Text | None = None
    max_waiting: Zero = 1024
    max_request_bytes: Count | None = None
    header_timeout: Annotated[Real, Field(gt=0)] | None = None
    body_timeout: Annotated[Real, Field(gt=0)] | None = None
    shutdown_timeout: Annotated[Real, Field(ge=0)] | None = None


@dataclass(frozen=True)
class Scenario:
    """One deployment question, frozen: every command reads what it needs from it."""

    __pydantic_config__ = _FORBID
    model: Model = field(default_factory=Model)
    device: Device = field(default_factory=Device)
    engine: Engine = field(default_factory=Engine)
    parallel: Parallel = field(default_factory=Parallel)
    dtypes: Dtypes = field(default_factory=Dtypes)
    scheduler: Scheduler = field(default_factory=Scheduler)
    memory: Memory = field(default_factory=Memory)
    lora: Lora = field(default_factory=Lora)
    multimodal: Multimodal = field(default_factory=Multimodal)
    load: Load = field(default_factory=Load)
    workload: Workload = field(default_factory=Workload)
    slo: Slo = field(default_factory=Slo)
    prices: Prices = field(default_factory=Prices)
    speculative: Speculative = field(default_factory=Speculative)
    simulator: Simulator = field(default_factory=Simulator)
    runtime: Runtime = field(default_factory=Runtime)
    search: Search = field(default_factory=Search)
    envelope: Envelope = field(default_factory=Envelope)
    client: Client = field(default_factory=Client)
    server: Server = field(default_factory=Server)


SECTIONS = tuple(f.name for f in fields(Scenario))


def paths() -> tuple[str, ...]:
    """Every field as section.name, in the file's order."""
    return tuple(f"{s.name}.{f.name}" for s in fields(Scenario)
                 for f in fields(s.default_factory))


def get(scenario: Scenario, path: str):
    """The value at section.name."""
    section, name = path.split(".")
    return getattr(getattr(scenario, section), name)


def with_values(scenario: Scenario, values: dict[str, object]) -> Scenario:
    """A copy with {section.name: value} set (the rest unchanged)."""
    by_section: dict[str, dict] = {}
    for path, value in values.items():
        section, name = path.split(".")
        by_section.setdefault(section, {})[name] = value
    return replace(scenario, **{s: replace(getattr(scenario, s), **v)
                                for s, v in by_section.items()})


DEFAULT = Scenario()
