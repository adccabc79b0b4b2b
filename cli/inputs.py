"""The plan flags as typed, and the Scenario they describe (scenario/ derives the rest)."""

from dataclasses import dataclass

from servecap.ledger.engines import PLAIN
from servecap.ledger.errors import SpecError
from servecap.ledger.serve import DEFAULT_MAX_NUM_SEQS, ServeSpec
from servecap.model_configs import LoadedModel
from servecap.scenario import serving
from servecap.scenario.deployment import deployment, file_overrides, load
from servecap.scenario.engine import engine_text, implied_engine
from servecap.scenario.spec import (
    DEFAULT,
    Device,
    Dtypes,
    Load,
    Lora,
    Memory,
    Model,
    Multimodal,
    Scenario,
    Scheduler,
)

from .deploy import DeployFlags, deploy_sections


@dataclass(frozen=True)
class PlanFlags:
    """The plan flags as typed; None means 'not given on the command line'."""

    device: str | None = None
    context: int | None = None
    concurrency: int | None = None
    lengths: str | None = None
    runtime_peak: str | None = None
    safety: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    activation_dtype: str | None = None
    block_size: int | None = None
    shared_prefix: int = 0
    group_size: int = 128
    max_num_batched_tokens: int | None = None  # None: 8192, or the vLLM release's default
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    dtype: str | None = None  # the model dtype of a launch line's --dtype (no flag of plan's)
    enable_lora: bool = False
    max_loras: int | None = None
    max_lora_rank: int | None = None
    max_cpu_loras: int | None = None
    lora_target_modules: str | None = None  # comma-separated (a launch line: space-separated)
    fully_sharded_loras: bool = False
    lora_dtype: str | None = None
    limit_mm_per_prompt: str | None = None
    mm_processor_kwargs: str | None = None
    mm_encoder_tp_mode: str | None = None
    skip_mm_profiling: bool = False
    image_size: str | None = None  # WxH, comma-separated


def plan_scenario(model: str | None, flags: PlanFlags, deploy=None) -> Scenario:
    """The Scenario plan's flags (and deployment flags, cli/deploy.py) describe."""
    seqs = flags.max_num_seqs if flags.max_num_seqs != DEFAULT_MAX_NUM_SEQS else None
    engine = DEFAULT.engine
    memory = Memory(runtime_peak=flags.runtime_peak, safety=flags.safety)
    parallel, link = DEFAULT.parallel, None
    if deploy is not None:
        engine, memory, parallel, own_seqs, link = deploy_sections(deploy, memory)
        seqs = own_seqs if own_seqs is not None else seqs
    return Scenario(
        model=Model(name=model), device=Device(name=flags.device, interconnect=link),
        engine=engine,
        parallel=parallel,
        dtypes=Dtypes(weight_dtype=flags.weight_dtype, kv_cache_dtype=flags.kv_dtype,
                      activation_dtype=flags.activation_dtype, group_size=flags.group_size,
                      dtype=flags.dtype),
        scheduler=Scheduler(max_model_len=flags.context, block_size=flags.block_size,
                            max_num_seqs=seqs,
                            max_num_batched_tokens=flags.max_num_batched_tokens),
        memory=memory, lora=lora_section(flags), multimodal=multimodal_section(flags),
        load=Load(concurrency=flags.concurrency, lengths=parse_lengths(flags.lengths),
                  shared_prefix=flags.shared_prefix))


def multimodal_section(flags: PlanFlags) -> Multimodal:
    """vLLM's multimodal knobs as plan's flags give them (--image-size comma-separated)."""
    sizes = None if flags.image_size is None else (flags.image_size,)
    return Multimodal(limit_mm_per_prompt=flags.limit_mm_per_prompt,
                      mm_processor_kwargs=flags.mm_processor_kwargs,
                      mm_encoder_tp_mode=flags.mm_encoder_tp_mode,
                      skip_mm_profiling=flags.skip_mm_profiling, image_size=sizes)


def lora_section(flags: PlanFlags) -> Lora:
    """vLLM's LoRA knobs as plan's flags give them (--lora-target-modules comma-separated)."""
    targets = None if flags.lora_target_modules is None else tuple(
        t for t in flags.lora_target_modules.replace(",", " ").split() if t)
    return Lora(enable_lora=flags.enable_lora, max_loras=flags.max_loras,
                max_lora_rank=flags.max_lora_rank, max_cpu_loras=flags.max_cpu_loras,
                lora_target_modules=targets, fully_sharded_loras=flags.fully_sharded_loras,
                lora_dtype=flags.lora_dtype)


# Which Scenario fields each of plan's flags (and the deployment flags) sets.
PLAN_PATHS = {
    "model": ("model.name",), "device": ("device.name",),
    "context": ("scheduler.max_model_len",), "concurrency": ("load.concurrency",),
    "lengths": ("load.lengths",), "runtime_peak": ("memory.runtime_peak",),
    "safety": ("memory.safety",), "weight_dtype": ("dtypes.weight_dtype",),
    "kv_dtype": ("dtypes.kv_cache_dtype",), "activation_dtype": ("dtypes.activation_dtype",),
    "block_size": ("scheduler.block_size",), "shared_prefix": ("load.shared_prefix",),
    "group_size": ("dtypes.group_size",),
    "max_num_batched_tokens": ("scheduler.max_num_batched_tokens",),
    "tensor_parallel_size": ("parallel.tensor_parallel_size",),
    "pipeline_parallel_size": ("parallel.pipeline_parallel_size",),
    "data_parallel_size": ("parallel.data_parallel_size",),
    "interconnect": ("device.interconnect",), "nnodes": ("parallel.nnodes",),
    **{name: (f"parallel.{name}",) for name in ("enable_expert_parallel", "enable_eplb",
                                                "num_redundant_experts", "eplb_window_size")},
    "engine": ("engine.name", "engine.version"),
    "gpu_memory_utilization": ("memory.gpu_memory_utilization",),
    "kv_cache_memory": ("memory.kv_cache_memory_bytes",),
    "mem_fraction_static": ("memory.mem_fraction_static",),
    "free_gpu_memory_fraction": ("memory.free_gpu_memory_fraction",),
    "max_tokens": ("memory.max_tokens",), "max_total_tokens": ("memory.max_total_tokens",),
    "max_num_seqs": ("scheduler.max_num_seqs",), "entrypoint": ("engine.entrypoint",),
    "mxfp4_backend": ("engine.mxfp4_backend",), "sampler": ("engine.sampler",),
    "cold_compile": ("engine.cold_compile",), "enforce_eager": ("engine.enforce_eager",),
    "non_torch": ("memory.non_torch",), "weights": ("memory.weights",),
    "comm_buffer": ("memory.comm_buffer",), "cuda_graph_memory": ("memory.cuda_graph_memory",),
    "kv_offloading_size": ("memory.kv_offloading_size",),
    "kv_offloading_backend": ("memory.kv_offloading_backend",),
    **{name: (f"lora.{name}",) for name in ("enable_lora", "max_loras", "max_lora_rank",
                                            "max_cpu_loras", "lora_target_modules",
                                            "fully_sharded_loras", "lora_dtype")},
    **{name: (f"multimodal.{name}",) for name in ("limit_mm_per_prompt", "mm_processor_kwargs",
                                                  "mm_encoder_tp_mode", "skip_mm_profiling",
                                                  "image_size")},
}


def plan_flags_of(scenario: Scenario):
    """A Scenario as plan's MODEL, PlanFlags and DeployFlags (for the workbook, which reads
    them)."""
    s, sched = scenario, scenario.scheduler
    vllm = implied_engine(s) == "vllm"
    flags = PlanFlags(
        device=s.device.name, context=sched.max_model_len, concurrency=s.load.concurrency,
        lengths=None if s.load.lengths is None else ",".join(map(str, s.load.lengths)),
        runtime_peak=_text(s.memory.runtime_peak), safety=_text(s.memory.safety),
        weight_dtype=s.dtypes.weight_dtype, kv_dtype=s.dtypes.kv_cache_dtype,
        activation_dtype=s.dtypes.activation_dtype, block_size=sched.block_size,
        shared_prefix=s.load.shared_prefix, group_size=s.dtypes.group_size,
        max_num_batched_tokens=sched.max_num_batched_tokens,
        max_num_seqs=DEFAULT_MAX_NUM_SEQS if vllm or sched.max_num_seqs is None
        else sched.max_num_seqs, dtype=s.dtypes.dtype, **_lora_flags(s.lora),
        **_multimodal_flags(s.multimodal))
    mem, eng, par = s.memory, s.engine, s.parallel
    deploy = DeployFlags(
        par.tensor_parallel_size, par.pipeline_parallel_size, par.data_parallel_size,
        interconnect=s.device.interconnect, nnodes=par.nnodes,
        enable_expert_parallel=par.enable_expert_parallel, enable_eplb=par.enable_eplb,
        num_redundant_experts=par.num_redundant_experts, eplb_window_size=par.eplb_window_size,
        engine=engine_text(s) if eng.name else PLAIN,
        gpu_memory_utilization=mem.gpu_memory_utilization,
        kv_cache_memory=_text(mem.kv_cache_memory_bytes),
        mem_fraction_static=mem.mem_fraction_static,
        free_gpu_memory_fraction=mem.free_gpu_memory_fraction, max_tokens=mem.max_tokens,
        max_total_tokens=mem.max_total_tokens,
        max_num_seqs=sched.max_num_seqs if vllm else None, entrypoint=eng.entrypoint,
        mxfp4_backend=eng.mxfp4_backend, sampler=eng.sampler, cold_compile=eng.cold_compile,
        enforce_eager=eng.enforce_eager, non_torch=_text(mem.non_torch),
        weights=_text(mem.weights), comm_buffer=_text(mem.comm_buffer),
        cuda_graph_memory=_text(mem.cuda_graph_memory),
        kv_offloading_size=mem.kv_offloading_size,
        kv_offloading_backend=mem.kv_offloading_backend)
    return s.model.ref, flags, deploy


def _multimodal_flags(mm: Multimodal) -> dict:
    return {"limit_mm_per_prompt": mm.limit_mm_per_prompt,
            "mm_processor_kwargs": mm.mm_processor_kwargs,
            "mm_encoder_tp_mode": mm.mm_encoder_tp_mode, "skip_mm_profiling": mm.skip_mm_profiling,
            "image_size": None if mm.image_size is None else ",".join(mm.image_size)}


def _lora_flags(lora: Lora) -> dict:
    targets = lora.lora_target_modules
    return {"enable_lora": lora.enable_lora, "max_loras": lora.max_loras,
            "max_lora_rank": lora.max_lora_rank, "max_cpu_loras": lora.max_cpu_loras,
            "lora_target_modules": None if targets is None else ",".join(targets),
            "fully_sharded_loras": lora.fully_sharded_loras, "lora_dtype": lora.lora_dtype}


def shown(value) -> str:
    """A scenario value as -v prints it: a list comma-separated, None as null."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return "null" if value is None else str(value)


def _text(value) -> str | None:
    return None if value is None else str(value)


def serve_spec(flags: PlanFlags, loaded: LoadedModel) -> ServeSpec:
    """Flags override the model file's serving defaults; what neither gives is vLLM's default."""
    return serving.serve_spec(plan_scenario(None, flags), loaded)


def model_for_flags(flags: PlanFlags, loaded: LoadedModel):
    """An explicit --weight-dtype replaces the checkpoint's own quantization."""
    return serving.model_spec(plan_scenario(None, flags), loaded)


def parse_lengths(text: str | None) -> tuple[int, ...] | None:
    """17,33,65 -> (17, 33, 65): every entry a whole number >= 1."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if not all(_is_count(part) for part in parts) or min(int(p) for p in parts) < 1:
        raise SpecError("--lengths", text, "comma-separated token counts, each >= 1, "
                        "e.g. 17,33,65")
    return tuple(int(part) for part in parts)


def _is_count(text: str) -> bool:
    """ASCII digits only ('²'.isdigit() is True), and few enough to be a token count."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def deployment_from_flags(model: str | None, flags: PlanFlags,
                          deploy=None, loaded: LoadedModel | None = None):
    """Every rank's ledger for these flags (scenario/deployment.py)."""
    return deployment(plan_scenario(model, flags, deploy), loaded)


def plan_parts(model: str | None, flags: PlanFlags):
    """What build_plan is called with: the model as flagged, the deployment, file weights."""
    scenario = plan_scenario(model, flags)
    loaded = load(scenario)
    return (serving.model_spec(scenario, loaded), serving.serve_spec(scenario, loaded),
            file_overrides(scenario, loaded))
