"""Where a Scenario becomes a plan: the model loaded, every rank's ledger under the engine's
semantics, and vLLM's own start-up advice when it would not start."""

from collections.abc import Callable
from dataclasses import dataclass, replace

from servecap.ledger.engines import DEFAULT_BLOCK_TOKENS, PLAIN, VLLM, as_cached
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Overrides
from servecap.ledger.ranks import Deployment, Parallel, build_deployment
from servecap.ledger.vllm_start import (
    StartAdvice,
    advise,
    advise_after_pool,
    fails_after_pool,
    starts,
)
from servecap.ledger.vllm_versions import VllmRow, check_block_size
from servecap.ledger.vllm_weights import check_act_dtype
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import LoadedModel, load_model

from .checkpoint import CheckpointFormats, checkpoint_formats, refuse_where_vllm_would
from .engine import engine_spec, implied_engine, size, with_device
from .serving import assumed_load, model_dtype, model_spec, serve_spec, weight_dtype_asked
from .spec import Scenario, get, with_values


@dataclass(frozen=True)
class PlanResult:
    """What `servecap plan` prints: the deployment, vLLM's advice when it does not start
    (None when it does) and the model as read."""

    deployment: Deployment
    advice: StartAdvice | None
    loaded: LoadedModel
    checkpoint: CheckpointFormats | None = None  # a quantized checkpoint's formats


def load(scenario: Scenario) -> LoadedModel:
    """The Scenario's model, read once (bundled name, file, directory or Hub id)."""
    ref = scenario.model.ref
    if ref is None:
        raise SpecError("MODEL", None, "required: a bundled name, a model file or directory or a "
                        "Hub id (or --scenario FILE; plan also --from-workbook)")
    return load_model(ref)


def plan(scenario: Scenario, loaded: LoadedModel | None = None) -> PlanResult:
    """Plan every rank, and find vLLM's advice when the plan would not start."""
    loaded = loaded or load(scenario)
    result, formats = checked_deployment(scenario, loaded)
    advice = None if starts(result) else start_advice(scenario, loaded, result)
    return PlanResult(result, advice, loaded, formats)


def checked_deployment(scenario: Scenario, loaded: LoadedModel
                       ) -> tuple[Deployment, CheckpointFormats | None]:
    """The deployment plan prints, once what vLLM would refuse for this checkpoint on this
    device is refused (the Envelope plans it again at each of its rows)."""
    formats = checkpoint_formats(scenario, loaded)
    refuse_where_vllm_would(formats, scenario)
    return deployment(scenario, loaded), formats


def replanner(scenario: Scenario, loaded: LoadedModel
              ) -> Callable[[str, int, str], Deployment]:
    """The deployment `plan` builds from this Scenario (its model as `loaded`), planned again
    at another device, context (every request of it) and KV dtype: the Envelope's rows; what
    vLLM would refuse there raises SpecError, as plan's does."""
    def at(device: str, context: int, kv_dtype: str) -> Deployment:
        point = with_values(scenario, {"device.name": device, "scheduler.max_model_len": context,
                                       "dtypes.kv_cache_dtype": kv_dtype, "load.lengths": None})
        return checked_deployment(point, loaded)[0]
    return at


def deployment(scenario: Scenario, loaded: LoadedModel | None = None,
               concurrency: int | None = None, release: VllmRow | None = None,
               formula: str | None = None) -> Deployment:
    """Every rank's ledger with the engine's semantics; concurrency replaces the resident load
    (the simulator sizes its pool from one resident request); release: the vLLM release a
    simulation runs, whose KV cache form (engines.as_cached) a ledger without vLLM's budget
    still takes; formula: the vLLM engine (v0 / v1) a log shows, where it is not the row's."""
    loaded = loaded or load(scenario)
    serve = serve_spec(scenario, loaded)
    if concurrency is not None:
        serve = replace(serve, concurrency=concurrency)
    engine = engine_spec(scenario)
    if formula is not None:
        engine = replace(engine, formula=formula)
    if engine.name != PLAIN and scenario.memory.safety is not None:
        raise SpecError("--safety", scenario.memory.safety, f"applies to --engine plain; "
                        f"{engine.name} keeps its own headroom (see its fraction flag)")
    if engine.name != PLAIN and scenario.scheduler.block_size is None and \
            loaded.serving.block_size is None:
        serve = replace(serve, block_size_tokens=DEFAULT_BLOCK_TOKENS[engine.name])
    spec = model_spec(scenario, loaded)
    if (assumed := assumed_load(scenario, loaded, serve)) is not None:
        spec = replace(spec, notes=(assumed, *spec.notes))
    if engine.name == VLLM:
        check_block_size(engine.vllm_row, serve.block_size_tokens)
        check_act_dtype(spec.quant and spec.quant.method, model_dtype(scenario),
                        scenario.dtypes.dtype)
        engine = with_device(engine, scenario.device.name or loaded.serving.device,
                             scenario.scheduler.max_num_batched_tokens)
        engine = replace(engine, pipeline_parallel_size=scenario.parallel.pipeline_parallel_size)
    par = scenario.parallel
    parallel = Parallel(par.tensor_parallel_size, par.pipeline_parallel_size,
                        par.data_parallel_size, par.enable_expert_parallel)
    overrides = measured_overrides(scenario, file_overrides(scenario, loaded))
    if engine.name != VLLM:
        spec = as_cached(spec, release)
    return build_deployment(spec, serve, overrides, parallel, engine)


def start_advice(scenario: Scenario, loaded: LoadedModel, result: Deployment) -> StartAdvice:
    """vLLM's own advice, each figure found by fit's search over this Scenario."""
    context = result.plan.serve.context_tokens
    util = scenario.memory.gpu_memory_utilization or result.plan.budget and \
        engine_spec(scenario).default_utilization

    def at(**values):
        return deployment(with_values(scenario, values), loaded)

    def at_length(n: int):
        return at(**{"scheduler.max_model_len": n})

    def at_utilization(u: float):
        return at(**{"memory.gpu_memory_utilization": u})

    if fails_after_pool(result):
        def at_seqs(n: int):
            return at(**{"scheduler.max_num_seqs": n})
        seqs = next(s.plan.after_pool.max_num_seqs for s in result.stages)
        return advise_after_pool(at_utilization, at_seqs, util or 1.0, seqs, result)
    return advise(at_length, at_utilization, context, util or 1.0)


def in_effect(scenario: Scenario, plan) -> dict[str, object]:
    """The value each unset field took in this plan (a ledger Plan): what --save-scenario
    writes beside its null, so a reader sees every default without changing the file's
    meaning (null still means: derive it again)."""
    serve, engine = plan.serve, implied_engine(scenario)
    taken = {"engine.name": engine, "scheduler.block_size": serve.block_size_tokens,
             "dtypes.weight_dtype": serve.weight_dtype, "dtypes.kv_cache_dtype": serve.kv_dtype,
             "dtypes.activation_dtype": serve.activation_dtype}
    if engine == PLAIN:  # an engine's release picks its own batch (not this plan's serve)
        taken |= {"scheduler.max_num_batched_tokens": serve.max_num_batched_tokens,
                  "scheduler.max_num_seqs": serve.max_num_seqs}
    if not serve.lengths:
        taken["scheduler.max_model_len"] = serve.context_tokens
        taken["load.concurrency"] = serve.concurrency
    if engine != PLAIN:
        taken["memory.gpu_memory_utilization"] = engine_spec(scenario).default_utilization \
            if engine == VLLM else None
    return {path: value for path, value in taken.items()
            if value is not None and get(scenario, path) is None}


def file_overrides(scenario: Scenario, loaded: LoadedModel) -> Overrides:
    """Safetensors headers give the weights exactly, unless a different dtype is asked for."""
    found = loaded.file_weights
    if found is None or weight_dtype_asked(scenario, loaded) is not None:
        return Overrides()
    from servecap.model_configs.checkpoint_weights import from_headers  # only with headers

    weights, src = from_headers(found, loaded.spec)
    return Overrides(weights=weights, weights_source=src)


def measured_overrides(scenario: Scenario, file: Overrides) -> Overrides:
    """A measured weights line replaces the weights (per GPU, as engines log it)."""
    measured = size(scenario.memory.weights, "--weights")
    if measured is None:
        return file
    return Overrides(weights=WeightBytes(measured, 0, 0, 0, ""),
                     weights_source="measured: --weights (values and metadata together)",
                     per_device=True)
