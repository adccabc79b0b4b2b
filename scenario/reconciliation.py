"""Where a Scenario meets a vLLM startup log: the log fills what the Scenario does not give,
the deployment is planned twice (from the config; with the log's measured lines), and each
figure is compared."""

from dataclasses import dataclass
from pathlib import Path

from servecap.ledger.devices import DEVICES
from servecap.ledger.engines import PLAIN, SGLANG, TRTLLM, VLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Deployment
from servecap.ledger.reconcile import (
    Reconciliation,
    binding_pool,
    check_same_model,
    reconcile,
)
from servecap.ledger.units import GiB
from servecap.ledger.vllm_log import LogFacts, parse_vllm_log, startup_total_gib
from servecap.ledger.vllm_start import free_memory_refusal
from servecap.ledger.vllm_versions import VllmRow, choose
from servecap.model_configs.reading import read_bytes

from .deployment import deployment, load
from .engine import engine_spec, engine_text, implied_engine, split_engine
from .log_flags import env_graphs, env_sampler, fill, logged_values
from .spec import Scenario, get, with_values

MAX_LOG_BYTES = 512 * 2**20  # a startup log is kilobytes; a long-running one stays far below


@dataclass(frozen=True)
class Prediction:
    """What reconcile sets beside a log: the log read, the Scenario the log filled in, the
    deployment `servecap plan` gives for that Scenario (the same function), the same with the
    log's measured lines declared, and notes on the rules and the device taken."""

    facts: LogFacts
    scenario: Scenario
    planned: Deployment
    replanned: Deployment
    notes: tuple[str, ...]
    refusal: str | None = None  # a start refused before the profile (the log's free memory)

    @property
    def starts(self) -> bool:
        """vLLM would start: every stage's pool, graphs and warm-up fit, and the free memory
        the log shows at startup covers what the release requests."""
        return self.refusal is None and all(s.plan.starts for s in self.planned.stages)


def reconcile_log(log: Path, scenario: Scenario) -> Reconciliation:
    """Parse, plan the same deployment twice (from the config; with the log's measured lines),
    check it is the same model, and compare; an SGLang or TensorRT-LLM log
    (--engine sglang|trtllm) is read by its engine's reader (scenario/engine_reconciliation)."""
    if implied_engine(scenario) in (SGLANG, TRTLLM):
        from .engine_reconciliation import reconcile_engine_log

        return reconcile_engine_log(log, scenario)
    found = predict(log, scenario)
    return reconcile(found.planned.plan, found.replanned.plan, found.facts, found.notes,
                     stage_plans(found.planned), found.refusal)


def stage_plans(planned: Deployment) -> tuple:
    """Each pipeline stage's ranks and ledger, for rows per rank."""
    return tuple((stage.ranks, stage.plan) for stage in planned.stages)


def predict(log: Path, scenario: Scenario) -> Prediction:
    """The log fills what the Scenario leaves unset (its release, flags, settings and link);
    the plan is scenario.deployment's, as `servecap plan` makes it, run under the log's engine
    (V0 or V1)."""
    if implied_engine(scenario) not in (PLAIN, VLLM):
        raise SpecError("--engine", implied_engine(scenario), "reconcile reads vLLM logs with "
                        "vllm (the default here), SGLang's with sglang, TensorRT-LLM's with trtllm")
    facts = parse_vllm_log(_read(log), str(log))
    loaded = load(scenario)
    logged, flag_notes = logged_values(facts)
    s, differ = fill(scenario, logged)
    if s.device.name is None:
        s = with_values(s, {"device.name": _logged_device(facts)})
    s, rules = _logged_engine(s, facts)
    if s.memory.cuda_graph_memory is None:
        s = with_values(s, _graph_values(facts, engine_spec(s).vllm_row))
    planned = deployment(s, loaded, formula=facts.engine_version)
    same = check_same_model(planned.plan, binding_pool(planned.plan, facts,
                                                       stage_plans(planned)),
                            planned.plan.model)
    replanned = deployment(with_values(s, _measured(facts, engine_spec(s).vllm_row)), loaded,
                           formula=facts.engine_version)
    notes = (rules,) + tuple(same) + flag_notes + tuple(
        f"{path} is the Scenario's, {get(s, path)!r}; the log's is {logged[path]!r}"
        for path in differ) + (() if scenario.device.name else _device_note(facts, s))
    engine = engine_spec(s)
    refusal = free_memory_refusal(engine.vllm_row, planned.plan.device_bytes,
                                  engine.gpu_memory_utilization or engine.default_utilization,
                                  facts.gib_bytes("free_at_start_gib"))
    return Prediction(facts, s, planned, replanned, notes, refusal)


def _logged_engine(s: Scenario, facts: LogFacts) -> tuple[Scenario, str]:
    """The log's release picks the rules unless the Scenario names one (the newest known where
    the log cannot be placed, said so), and the VLLM_* settings it shows apply."""
    if s.engine.name == VLLM and s.engine.version:
        spelling, said = engine_text(s), "as --engine asked"
    elif facts.release:
        spelling, said = f"vllm=={facts.release}", facts.release_basis
    else:
        spelling, said = VLLM, f"{facts.release_basis}: the newest known is assumed"
    choice = choose(spelling)
    rules = (f"rules: {choice.row.name} ({choice.row.tag}), {said}"
             + (f"; {choice.note}" if choice.note and spelling != VLLM else "")
             + ("; pin one with --engine vllm==X.Y" if spelling == VLLM else ""))
    # the release as the log or --engine gives it (its batch defaults differ within a row:
    # ledger/vllm_batch.py); the newest row's where neither says
    name, version = split_engine(choice.row.pin if spelling == VLLM else spelling)
    sampler = s.engine.sampler or env_sampler(facts, choice.row)
    return with_values(s, {"engine.name": name, "engine.version": version,
                           "engine.sampler": sampler}), rules


def _read(log: Path) -> str:
    """A regular file of at most MAX_LOG_BYTES (never /dev/zero or a pipe); bad bytes replaced."""
    return read_bytes(log, MAX_LOG_BYTES, "log").decode("utf-8", errors="replace")


def _logged_device(facts: LogFacts) -> str:
    if facts.total_gpu_gib is None:
        total = startup_total_gib(facts)
        shown = "" if total is None else (
            f"; its 'Free memory on device' line shows {total} GiB, rounded to 0.01 GiB "
            f"(--device {total}GiB plans that)")
        raise SpecError("--device", None, "the log does not print total_gpu_memory: give the "
                        f"device (catalog name or size){shown}")
    return f"{facts.total_gpu_gib}GiB"


def served_model(log: Path) -> str | None:
    """The model a vLLM log says it loads (its Hub id or path), for the error that asks for
    --model; None when the log names none. A log that cannot be read is that error: a
    mistyped path is named before the model it would have given."""
    text = _read(log)
    try:
        return parse_vllm_log(text, str(log)).model
    except SpecError:
        return None


def _measured(facts: LogFacts, row: VllmRow) -> dict[str, str]:
    """The log's lines as declared values (bytes): weights, activation peak, non-torch, and
    the CUDA-graph estimate where it is taken out of the pool (the release's rule, or the
    log's VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS). vLLM profiles the collective buffers as
    non-torch memory, so a logged non-torch figure holds them (--comm-buffer 0)."""
    values = {}
    for attr, path in (("weights_gib", "memory.weights"),
                       ("activation_peak_gib", "memory.runtime_peak"),
                       ("non_torch_gib", "memory.non_torch")):
        if getattr(facts, attr) is not None:
            values[path] = str(facts.gib_bytes(attr))
    if facts.non_torch_gib is not None:
        values["memory.comm_buffer"] = "0"
    if facts.cuda_graph_gib is not None and env_graphs(facts, row):
        values["memory.cuda_graph_memory"] = str(facts.gib_bytes("cuda_graph_gib"))
    return values


def _graph_values(facts: LogFacts, row: VllmRow) -> dict[str, str]:
    """No CUDA graphs in the pool: --enforce-eager captures none, and a release that subtracts
    the estimate does not where the log sets VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."""
    if facts.enforce_eager or (row.graphs_subtracted and not env_graphs(facts, row)):
        return {"memory.cuda_graph_memory": "0"}
    return {}


def _device_note(facts: LogFacts, s: Scenario) -> tuple[str, ...]:
    """A device taken from the log's total_gpu_memory is a bare size: no SM count (the Triton
    sampler's buffer) and no interconnect (collectives planned as over PCIe)."""
    size = f"{facts.total_gpu_gib:.2f}"
    same = [d.name for d in DEVICES if f"{d.usable_bytes / GiB:.2f}" == size]
    named = (f"; the catalog's {', '.join(same)} {'has' if len(same) == 1 else 'have'} this "
             "size" if same else "")
    link = " and collectives over PCIe" if s.parallel.tensor_parallel_size > 1 else ""
    return (f"device: the log's total_gpu_memory, {facts.total_gpu_gib} GiB, as a bare size "
            f"(planned with no SM count{link}){named}: name the GPU with --device",)
