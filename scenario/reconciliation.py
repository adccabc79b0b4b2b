"""Where a Scenario meets a vLLM startup log: the log fills what the Scenario does not give,
the deployment is planned twice (from the config; with the log's measured lines), and each
figure is compared."""

from dataclasses import replace
from pathlib import Path

from servecap.ledger.engines import PLAIN, VLLM, EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Overrides
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.reconcile import Reconciliation, check_same_model, reconcile
from servecap.ledger.vllm_log import LogFacts, parse_vllm_log
from servecap.ledger.vllm_versions import choose
from servecap.ledger.weights import WeightBytes
from servecap.model_configs.reading import read_bytes

from .deployment import load
from .engine import engine_spec, engine_text, implied_engine, split_engine, with_device
from .serving import model_spec, serve_spec
from .spec import Scenario, with_values

MAX_LOG_BYTES = 512 * 2**20  # a startup log is kilobytes; a long-running one stays far below


def reconcile_log(log: Path, scenario: Scenario) -> Reconciliation:
    """Parse, plan the same deployment twice (from the config; with the log's measured lines),
    check it is the same model, and compare."""
    if implied_engine(scenario) not in (PLAIN, VLLM):
        raise SpecError("--engine", implied_engine(scenario), "reconcile reads vLLM logs: vllm "
                        "(the default here)")
    facts = parse_vllm_log(_read(log), str(log))
    loaded = load(scenario)
    s, sched = scenario, scenario.scheduler
    s = with_values(s, {
        "device.name": s.device.name or _logged_device(facts),
        "scheduler.max_model_len": sched.max_model_len or facts.max_model_len,
        "dtypes.kv_cache_dtype": s.dtypes.kv_cache_dtype or _kv_dtype(facts.kv_cache_dtype),
        "scheduler.max_num_batched_tokens": sched.max_num_batched_tokens
        or facts.max_num_batched_tokens})
    s, rules = _logged_engine(s, facts)
    engine = with_device(engine_spec(s), s.device.name, s.scheduler.max_num_batched_tokens)
    engine = replace(engine, formula=facts.engine_version, version_note="")
    spec, serve = model_spec(s, loaded), serve_spec(s, loaded)
    parallel = Parallel(s.parallel.tensor_parallel_size, s.parallel.pipeline_parallel_size)
    plan = build_deployment(spec, serve, Overrides(), parallel, engine).plan
    check_same_model(plan, facts, spec.name)
    replanned = build_deployment(
        spec, replace(serve, runtime_peak_bytes=facts.gib_bytes("activation_peak_gib")
                      if facts.activation_peak_gib is not None else serve.runtime_peak_bytes),
        _measured(facts), parallel, _measured_engine(engine, facts)).plan
    return reconcile(plan, replanned, facts, rules)


def _logged_engine(s: Scenario, facts: LogFacts) -> tuple[Scenario, str]:
    """The log's release picks the rules unless the Scenario names one; the log's flags fill
    what was not given (tensor parallel size, utilization, batch, sampler, MXFP4 kernel)."""
    if s.engine.name == VLLM and s.engine.version:
        spelling, said = engine_text(s), "as --engine asked"
    elif facts.version:
        spelling, said = f"vllm=={facts.version}", f"the log's vLLM {facts.version}"
    elif facts.format_version:
        version, why = facts.format_version
        spelling, said = f"vllm=={version}", f"the log states no version; {why} is {version}'s"
    else:
        spelling, said = VLLM, "the log states no vLLM version: the newest known"
    choice = choose(spelling)
    rules = (f"rules: {choice.row.name} ({choice.row.tag}), {said}"
             + (f"; {choice.note}" if choice.note and spelling != VLLM else "")
             + ("; pin one with --engine vllm==X.Y" if spelling == VLLM else ""))
    name, version = split_engine(choice.row.pin)
    tp, eng = s.parallel.tensor_parallel_size, s.engine
    logged = {
        "engine.name": name, "engine.version": version,
        "memory.gpu_memory_utilization": s.memory.gpu_memory_utilization
        or facts.gpu_memory_utilization,
        "parallel.tensor_parallel_size": facts.tensor_parallel_size or tp if tp == 1 else tp,
        "scheduler.max_num_seqs": s.scheduler.max_num_seqs or facts.max_num_seqs,
        "engine.mxfp4_backend": eng.mxfp4_backend or facts.mxfp4_backend,
        "engine.sampler": eng.sampler or facts.sampler}
    return with_values(s, logged), rules


def _measured_engine(engine: EngineSpec, facts: LogFacts) -> EngineSpec:
    """The log's lines as measured: its non-torch figure already holds the collective buffers
    (vLLM profiles them as non-torch memory), and its CUDA-graph estimate moves the pool only
    in releases that subtract it."""
    logged_non_torch = facts.non_torch_gib is not None
    graphs = facts.cuda_graph_gib is not None and engine.vllm_row.graphs_subtracted
    return replace(engine, non_torch_bytes=facts.gib_bytes("non_torch_gib")
                   if logged_non_torch else engine.non_torch_bytes,
                   comm_buffer_bytes=0 if logged_non_torch else engine.comm_buffer_bytes,
                   cuda_graph_bytes=facts.gib_bytes("cuda_graph_gib")
                   if graphs else engine.cuda_graph_bytes)


def _kv_dtype(logged: str | None) -> str | None:
    """vLLM's 'auto' is the model's dtype; fp8_e4m3 / fp8_e5m2 are one byte, as fp8."""
    if logged in (None, "auto"):
        return None
    return "fp8" if logged.startswith("fp8") else logged


def _read(log: Path) -> str:
    """A regular file of at most MAX_LOG_BYTES (never /dev/zero or a pipe); bad bytes replaced."""
    return read_bytes(log, MAX_LOG_BYTES, "log").decode("utf-8", errors="replace")


def _logged_device(facts: LogFacts) -> str:
    if facts.total_gpu_gib is None:
        raise SpecError("--device", None, "the log does not print total_gpu_memory: give the "
                        "device (catalog name or size)")
    return f"{facts.total_gpu_gib}GiB"


def _measured(facts: LogFacts) -> Overrides:
    if facts.weights_gib is None:
        return Overrides()
    return Overrides(weights=WeightBytes(facts.gib_bytes("weights_gib"), 0, 0, 0, ""),
                     weights_source="measured: the log", per_device=True)
