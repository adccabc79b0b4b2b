"""The Scenario: one frozen description of a deployment question, in vLLM's names where
servecap mirrors a vLLM knob. None means "not given: the default applies" (each default lives
where it is derived: scenario/deployment.py, the ledger, the engine's release rules).

The annotations are also the scenario file's schema: scenario/file.py validates a YAML mapping
into these dataclasses with pydantic (strict scalars, unknown keys refused, ranges checked).
They are kept as text (scenario/spec_types.py's types are pydantic's): a command that reads no
scenario file imports no pydantic."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Annotated

from servecap.ledger.serve import DEFAULT_WATERMARK

from .spec_runs import (
    FORBID,
    Client,
    Envelope,
    Load,
    Prices,
    Runtime,
    Search,
    Server,
    Simulator,
    Slo,
    Speculative,
    Workload,
)

if TYPE_CHECKING:  # scenario/file.py names them where it builds the validator
    from pydantic import Field, StrictBool

    from .spec_types import Count, Fraction, Real, Size, Text, Zero


@dataclass(frozen=True)
class Model:
    """What to plan: a bundled name, a model YAML, a config.json, a model directory or a
    Hugging Face Hub id; revision pins a Hub commit, branch or tag (vLLM's --revision)."""

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
    name: Text | None = None
    bandwidth: Text | None = None
    flops: Text | None = None
    interconnect: Text | None = None


@dataclass(frozen=True)
class Engine:
    """Whose budget semantics apply (plain, vllm, sglang, trtllm; None: the engine the knobs
    name, else plain), the vLLM release ('0.11', '>=0.21'; None: the newest rules known) and
    vLLM's start-up choices."""

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
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

    __pydantic_config__ = FORBID
    limit_mm_per_prompt: Text | None = None
    mm_processor_kwargs: Text | None = None
    mm_encoder_tp_mode: Text | None = None
    skip_mm_profiling: StrictBool = False
    image_size: tuple[Text, ...] | None = None


@dataclass(frozen=True)
class Scenario:
    """One deployment question, frozen: every command reads what it needs from it."""

    __pydantic_config__ = FORBID
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
