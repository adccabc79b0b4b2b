"""The flags simulate, sweep and their kin share, and the Scenario they describe; what a run
needs is derived from it beneath the commands (scenario/simulation.py)."""

from dataclasses import dataclass, replace
from pathlib import Path

from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
)
from servecap.scenario import simulation, steps
from servecap.scenario.simulation import Ranked, Setup  # noqa: F401 (re-exported)
from servecap.scenario.spec import (
    DEFAULT,
    Device,
    Dtypes,
    Engine,
    Memory,
    Model,
    Parallel,
    Scenario,
    Scheduler,
    Simulator,
    Slo,
    Speculative,
    Workload,
)
from servecap.scenario.values import (  # noqa: F401 (re-exported)
    parse_bandwidth,
    parse_duration,
    parse_flops,
    parse_percentiles,
    slo,
)
from servecap.scenario.workload import load_workload, requests  # noqa: F401
from servecap.sim.roofline import Coefficients
from servecap.sim.speculative import Speculation


@dataclass(frozen=True)
class SimFlags:
    """The flags simulate and sweep share; None: not given."""

    device: str | None = None
    bandwidth: str | None = None
    flops: str | None = None
    step_overhead: str = DEFAULT.simulator.step_overhead
    coefficients: Path | None = None
    workload: Path | None = None
    trace: Path | None = None
    policies: tuple[str, ...] = DEFAULT.simulator.policies
    context: int | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    dtype: str | None = None  # the model dtype (a launch line's --dtype)
    block_size: int = DEFAULT_BLOCK_SIZE_TOKENS
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    watermark: float = DEFAULT.scheduler.watermark
    preemption: str = DEFAULT.scheduler.preemption_mode
    prefix_caching: bool = DEFAULT.scheduler.enable_prefix_caching
    slo_ttft: str | None = None
    slo_itl: str | None = None
    slo_e2e: str | None = None
    replicas: int = 1
    router: str = DEFAULT.simulator.router
    disaggregate: str | None = None
    kv_transfer: str = DEFAULT.simulator.kv_transfer
    runtime_peak: str | None = None
    safety: str | None = None
    num_gpu_blocks: int | None = None
    kv_offloading_size: float | None = None
    kv_offloading_backend: str | None = None
    draft: str | None = None
    draft_length: int = DEFAULT.speculative.num_speculative_tokens
    acceptance: float = DEFAULT.speculative.acceptance
    speculate_max_batch: int | None = None
    scheduling: str = DEFAULT.scheduler.scheduling_policy
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    speed_of_light: bool = False
    concurrency: int | None = None
    step_time_cv: float | None = None
    seed: int = 0
    expert_parallel: bool = False
    percentiles: str | None = None
    rate: float | None = None
    num_requests: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    engine: str | None = None
    num_scheduler_steps: int = 1
    enforce_eager: bool = False
    async_scheduling: bool | None = None


def sim_scenario(model: str | None, flags: SimFlags, seeds: int = 1) -> Scenario:
    """The Scenario simulate's flags describe."""
    def text(path):
        return None if path is None else str(path)
    return Scenario(
        model=Model(name=model),
        device=Device(name=flags.device, bandwidth=flags.bandwidth, flops=flags.flops),
        parallel=Parallel(flags.tensor_parallel_size, flags.pipeline_parallel_size,
                          enable_expert_parallel=flags.expert_parallel),
        dtypes=Dtypes(weight_dtype=flags.weight_dtype, kv_cache_dtype=flags.kv_dtype,
                      dtype=flags.dtype),
        scheduler=Scheduler(max_model_len=flags.context, block_size=flags.block_size,
                            max_num_seqs=flags.max_num_seqs,
                            max_num_batched_tokens=flags.max_num_batched_tokens,
                            enable_prefix_caching=flags.prefix_caching,
                            scheduling_policy=flags.scheduling, watermark=flags.watermark,
                            preemption_mode=flags.preemption,
                            num_scheduler_steps=flags.num_scheduler_steps,
                            async_scheduling=flags.async_scheduling),
        memory=Memory(runtime_peak=flags.runtime_peak, safety=flags.safety,
                      num_gpu_blocks_override=flags.num_gpu_blocks,
                      kv_offloading_size=flags.kv_offloading_size,
                      kv_offloading_backend=flags.kv_offloading_backend),
        workload=Workload(file=text(flags.workload), trace=text(flags.trace), rate=flags.rate,
                          num_requests=flags.num_requests, input_len=flags.input_len,
                          output_len=flags.output_len, max_concurrency=flags.concurrency),
        slo=Slo(ttft=flags.slo_ttft, tpot=flags.slo_itl, e2e=flags.slo_e2e,
                percentiles=flags.percentiles),
        speculative=Speculative(model=flags.draft, num_speculative_tokens=flags.draft_length,
                                acceptance=flags.acceptance,
                                disable_by_batch_size=flags.speculate_max_batch),
        simulator=Simulator(policies=tuple(flags.policies), step_overhead=flags.step_overhead,
                            coefficients=text(flags.coefficients),
                            speed_of_light=flags.speed_of_light,
                            step_time_cv=flags.step_time_cv, seed=flags.seed, seeds=seeds,
                            replicas=flags.replicas, router=flags.router,
                            disaggregate=flags.disaggregate, kv_transfer=flags.kv_transfer,
                            engine=flags.engine),
        engine=Engine(enforce_eager=flags.enforce_eager))


# Which Scenario fields each of simulate's (and sweep's) flags sets.
SIM_PATHS = {
    "model": ("model.name",), "device": ("device.name",), "bandwidth": ("device.bandwidth",),
    "flops": ("device.flops",), "step_overhead": ("simulator.step_overhead",),
    "coefficients": ("simulator.coefficients",), "workload": ("workload.file",),
    "trace": ("workload.trace",), "policy": ("simulator.policies",),
    "context": ("scheduler.max_model_len",), "weight_dtype": ("dtypes.weight_dtype",),
    "kv_dtype": ("dtypes.kv_cache_dtype",), "block_size": ("scheduler.block_size",),
    "max_num_batched_tokens": ("scheduler.max_num_batched_tokens",),
    "max_num_seqs": ("scheduler.max_num_seqs",), "watermark": ("scheduler.watermark",),
    "preemption": ("scheduler.preemption_mode",),
    "prefix_caching": ("scheduler.enable_prefix_caching",), "slo_ttft": ("slo.ttft",),
    "slo_itl": ("slo.tpot",), "slo_e2e": ("slo.e2e",), "percentiles": ("slo.percentiles",),
    "replicas": ("simulator.replicas",), "router": ("simulator.router",),
    "disaggregate": ("simulator.disaggregate",), "kv_transfer": ("simulator.kv_transfer",),
    "runtime_peak": ("memory.runtime_peak",), "safety": ("memory.safety",),
    "num_gpu_blocks": ("memory.num_gpu_blocks_override",), "draft": ("speculative.model",),
    "kv_offloading_size": ("memory.kv_offloading_size",),
    "kv_offloading_backend": ("memory.kv_offloading_backend",),
    "draft_length": ("speculative.num_speculative_tokens",),
    "acceptance": ("speculative.acceptance",),
    "speculate_max_batch": ("speculative.disable_by_batch_size",),
    "scheduling": ("scheduler.scheduling_policy",),
    "tensor_parallel_size": ("parallel.tensor_parallel_size",),
    "pipeline_parallel_size": ("parallel.pipeline_parallel_size",),
    "speed_of_light": ("simulator.speed_of_light",),
    "concurrency": ("workload.max_concurrency",), "step_time_cv": ("simulator.step_time_cv",),
    "seed": ("simulator.seed",), "seeds": ("simulator.seeds",), "rate": ("workload.rate",),
    "num_requests": ("workload.num_requests",), "input_len": ("workload.input_len",),
    "output_len": ("workload.output_len",),
    "expert_parallel": ("parallel.enable_expert_parallel",),
    "engine": ("simulator.engine",),
    "num_scheduler_steps": ("scheduler.num_scheduler_steps",),
    "enforce_eager": ("engine.enforce_eager",),
    "async_scheduling": ("scheduler.async_scheduling",),
}


def sim_flags(scenario: Scenario) -> SimFlags:
    """A Scenario as simulate's flags (for what still reads them: the simulated workbook)."""
    s = scenario
    sched, sim, w = s.scheduler, s.simulator, s.workload

    def path(text):
        return None if text is None else Path(text)
    return SimFlags(
        device=s.device.name, bandwidth=s.device.bandwidth, flops=s.device.flops,
        step_overhead=sim.step_overhead, coefficients=path(sim.coefficients),
        workload=path(w.file), trace=path(w.trace), policies=sim.policies,
        context=sched.max_model_len, weight_dtype=s.dtypes.weight_dtype,
        kv_dtype=s.dtypes.kv_cache_dtype, dtype=s.dtypes.dtype,
        block_size=_given(sched.block_size, DEFAULT_BLOCK_SIZE_TOKENS),
        max_num_batched_tokens=sched.max_num_batched_tokens,
        max_num_seqs=sched.max_num_seqs,
        watermark=sched.watermark, preemption=sched.preemption_mode,
        prefix_caching=sched.enable_prefix_caching,
        slo_ttft=s.slo.ttft, slo_itl=s.slo.tpot, slo_e2e=s.slo.e2e,
        replicas=sim.replicas, router=sim.router, disaggregate=sim.disaggregate,
        kv_transfer=sim.kv_transfer, runtime_peak=s.memory.runtime_peak,
        safety=s.memory.safety, num_gpu_blocks=s.memory.num_gpu_blocks_override,
        kv_offloading_size=s.memory.kv_offloading_size,
        kv_offloading_backend=s.memory.kv_offloading_backend,
        draft=s.speculative.model, draft_length=s.speculative.num_speculative_tokens,
        acceptance=s.speculative.acceptance,
        speculate_max_batch=s.speculative.disable_by_batch_size,
        scheduling=sched.scheduling_policy,
        tensor_parallel_size=s.parallel.tensor_parallel_size,
        pipeline_parallel_size=s.parallel.pipeline_parallel_size,
        speed_of_light=sim.speed_of_light, concurrency=w.max_concurrency,
        step_time_cv=sim.step_time_cv, seed=sim.seed,
        expert_parallel=s.parallel.enable_expert_parallel, percentiles=s.slo.percentiles,
        rate=w.rate, num_requests=w.num_requests, input_len=w.input_len,
        output_len=w.output_len, engine=sim.engine,
        num_scheduler_steps=sched.num_scheduler_steps, enforce_eager=s.engine.enforce_eager,
        async_scheduling=sched.async_scheduling)


def batch_in_effect(setup: Setup) -> dict[str, int]:
    """The batch limits the simulated steps ran under, for --save-scenario's comments: the
    release's defaults, not the ledger plan's (which the memory engine, plain, would take)."""
    config = setup.configs[0]
    return {"scheduler.max_num_batched_tokens": config.max_num_batched_tokens,
            "scheduler.max_num_seqs": config.max_num_seqs}


def _given(value, default):
    return default if value is None else value


def build_setup(model: str, flags: SimFlags) -> Setup:
    """Plan the device with the ledger, price iterations with the roofline, load the load."""
    return simulation.setup(sim_scenario(model, flags))


def speculation_for(flags: SimFlags, drafted: Ranked | None = None) -> Speculation | None:
    return simulation.speculation(sim_scenario(None, flags), drafted)


def draft_plan(draft: str, flags: SimFlags) -> Ranked:
    """The draft model's ranks; a model that cannot be loaded is named as --draft."""
    return simulation.draft_rank(sim_scenario(None, replace(flags, draft=draft)))


def device_coefficients(ranked: Ranked, flags: SimFlags) -> Coefficients:
    """The step model of `ranked` on the flagged device (scenario/steps.py)."""
    return steps.coefficients(ranked, sim_scenario(None, flags))


def rank_for(model: str, flags: SimFlags) -> Ranked:
    """`servecap plan`'s own per-rank deployment of `model`, one resident request."""
    return simulation.rank(sim_scenario(model, flags))
