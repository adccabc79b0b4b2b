"""Where a Scenario meets an SGLang or TensorRT-LLM startup log: the log fills what the Scenario
leaves unset (tensor parallelism, the engine's memory fraction, context, page size, KV dtype),
the deployment is planned as `servecap plan --engine sglang|trtllm` plans it, and compared."""

from dataclasses import dataclass
from pathlib import Path

from servecap.ledger.engine_log import SGLANG, EngineLogFacts, parse_engine_log
from servecap.ledger.engine_reconcile import reconcile_engine
from servecap.ledger.engines import DEFAULT_FREE_GPU_MEMORY_FRACTION
from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Deployment
from servecap.ledger.reconcile import Reconciliation
from servecap.model_configs.reading import read_bytes

from .deployment import deployment, load
from .engine import implied_engine
from .log_flags import fill
from .spec import Scenario, with_values

MAX_LOG_BYTES = 512 * 2**20
_KV = {"float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
       "fp8": "fp8", "bfloat16": None, "float16": None, "auto": None}


@dataclass(frozen=True)
class EnginePrediction:
    """The log read, the Scenario it filled in, and plan's deployment for it."""

    facts: EngineLogFacts
    scenario: Scenario
    planned: Deployment
    notes: tuple[str, ...]

    @property
    def fraction(self) -> float | None:
        """The memory fraction the plan used (TensorRT-LLM's default where none is set)."""
        if self.facts.engine == SGLANG:
            return self.scenario.memory.mem_fraction_static
        return self.scenario.memory.free_gpu_memory_fraction or DEFAULT_FREE_GPU_MEMORY_FRACTION


def reconcile_engine_log(log: Path, scenario: Scenario) -> Reconciliation:
    found = predict_engine(log, scenario)
    return reconcile_engine(found.planned.plan, found.facts, found.notes, found.fraction)


def predict_engine(log: Path, scenario: Scenario) -> EnginePrediction:
    engine = implied_engine(scenario)
    text = read_bytes(log, MAX_LOG_BYTES, "log").decode("utf-8", errors="replace")
    facts = parse_engine_log(text, engine, str(log))
    s, differ = fill(with_values(scenario, {"engine.name": engine}), logged_values(facts))
    if s.device.name is None:
        if facts.total_gib is None:
            raise SpecError("--device", None, f"{engine}'s log does not print the device's total "
                            "memory: give the device (catalog name or size)")
        s = with_values(s, {"device.name": f"{facts.total_gib}GiB"})
    planned = deployment(s, load(scenario))
    notes = tuple(f"{path} is the Scenario's; the log's is {value!r}"
                  for path, value in logged_values(facts).items() if path in differ)
    return EnginePrediction(facts, s, planned, notes + _model_note(facts, planned))


def logged_values(facts: EngineLogFacts) -> dict[str, object]:
    """The Scenario fields the log states, in the engine's own knobs."""
    fraction = ("memory.mem_fraction_static" if facts.engine == SGLANG
                else "memory.free_gpu_memory_fraction")
    pairs = {"parallel.tensor_parallel_size": facts.tensor_parallel_size,
             fraction: facts.fraction, "scheduler.max_model_len": facts.context_len,
             "scheduler.block_size": facts.tokens_per_block,
             "dtypes.kv_cache_dtype": _KV.get(facts.kv_cache_dtype or "auto"),
             "memory.max_tokens": facts.max_tokens,
             "memory.max_total_tokens": facts.max_total_tokens,
             "parallel.nnodes": facts.nnodes}
    return {path: value for path, value in pairs.items() if value is not None}


def _model_note(facts: EngineLogFacts, planned: Deployment) -> tuple[str, ...]:
    if not facts.model:
        return ()
    check = ("the weights row checks that they are the same model" if facts.weights_gib
             is not None else "the log prints no weights line to check that they are the same "
             "model")
    return (f"the log loads {facts.model!r}; the config given is {planned.plan.model!r} "
            f"({check})",)
