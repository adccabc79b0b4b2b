"""Where a Scenario becomes a simulation: the ledger's KV pool (plan's own deployment, one
resident request), the step model, the scheduler configs, the fleet and the requests."""

from dataclasses import dataclass

from servecap.ledger.engines import PLAIN
from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Plan
from servecap.ledger.ranks import Deployment as RankDeployment
from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment
from servecap.sim.kvpool import pool_blocks, state_blocks
from servecap.sim.metrics import SLO
from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import Request
from servecap.sim.speculative import Speculation
from servecap.sim.workload import Workload

from . import steps
from .deployment import deployment, load
from .serving import model_spec
from .spec import Scenario, with_values
from .values import parse_bandwidth, slo
from .workload import requests as scenario_requests


@dataclass(frozen=True)
class Ranked:
    """The model as described, plan's per-rank deployment, and its binding rank's ledger."""

    spec: ModelSpec
    deployment: RankDeployment
    hub: object = None  # HubSource when read from the Hugging Face Hub (simulate -v)

    @property
    def plan(self) -> Plan:
        return self.deployment.plan


@dataclass(frozen=True)
class Setup:
    """Everything a run needs, built once: plan, coefficients, pool, configs, requests."""

    plan: Plan
    coefficients: Coefficients
    num_blocks: int
    configs: tuple[SchedulerConfig, ...]
    requests: list[Request]
    workload: Workload | None
    slo: SLO
    source: str
    deployment: Deployment = Deployment()
    draft: Plan | None = None  # the resident draft's ledger (speculative.model), sharing the pool
    hub: object = None  # HubSource when the model was read from the Hugging Face Hub
    engine: dict | None = None  # which release runs around the kernels (steps.engine_label)
    batch_source: str = ""  # where the configs' batch limits came from (scheduler_batch)


def rank(scenario: Scenario) -> Ranked:
    """`servecap plan`'s own per-rank deployment (one ledger, the same function) with one
    resident request: the pool the simulator schedules in."""
    loaded = load(scenario)
    return Ranked(model_spec(scenario, loaded), deployment(
        scenario, loaded, concurrency=1, release=steps.scenario_row(scenario)), loaded.hub)


def setup(scenario: Scenario, sent: list[Request] | None = None,
          source: str | None = None) -> Setup:
    """Plan the device with the ledger, price iterations with the step model, load the load
    (the scenario's workload, or `sent`: requests a server was sent, named `source`)."""
    ranked = rank(scenario)
    plan = ranked.plan
    coef = steps.coefficients(ranked, scenario)
    drafted = draft_rank(scenario) if scenario.speculative.model else None
    draft = drafted and drafted.plan
    batch = scheduler_batch(scenario, plan)
    configs = scheduler_configs(scenario, plan, speculation(scenario, drafted), draft, batch)
    sim = scenario.simulator
    concurrency = scenario.workload.max_concurrency
    if concurrency is not None and (sim.replicas > 1 or sim.disaggregate):
        raise SpecError("--concurrency", concurrency, "closed loop runs one engine: drop "
                        "--replicas/--disaggregate")
    reqs, workload, source = (list(sent), None, source or "requests sent") if sent is not None \
        else scenario_requests(scenario, plan.serve.block_size_tokens)
    check_fixed_shape(scenario, max_model_len(plan))
    return Setup(plan, coef, num_blocks(plan, scenario, draft), configs, reqs, workload,
                 slo(scenario), source, fleet(scenario), draft, ranked.hub,
                 steps.scenario_engine_label(scenario), batch[2])


def scheduler_batch(scenario: Scenario, plan: Plan) -> tuple[int, int, str]:
    """The configs' max_num_batched_tokens and max_num_seqs (the Scenario's, else the
    simulated V1 release's own defaults for the device, else the defaults the ledger planned
    with), and where they came from, in words."""
    sched, serve = scenario.scheduler, plan.serve
    limits = steps.scenario_batch_limits(scenario, plan)
    tokens = sched.max_num_batched_tokens or (limits.tokens if limits
                                              else serve.max_num_batched_tokens)
    seqs = sched.max_num_seqs or (limits.seqs if limits else serve.max_num_seqs)
    given = [flag for flag, value in (("--max-num-batched-tokens", sched.max_num_batched_tokens),
                                      ("--max-num-seqs", sched.max_num_seqs)) if value]
    default = limits.why if limits else "the plan's defaults (no release default simulated)"
    if len(given) == 2:
        return tokens, seqs, "given (--max-num-batched-tokens, --max-num-seqs)"
    return tokens, seqs, f"{given[0]} given; otherwise {default}" if given else default


def scheduler_configs(scenario: Scenario, plan: Plan, speculation: Speculation | None,
                      draft: Plan | None, batch: tuple[int, int, str]
                      ) -> tuple[SchedulerConfig, ...]:
    """One config per policy compared, with the ledger's block size and the batch limits
    scheduler_batch gives (`batch`), a hybrid's state blocks, and the max_model_len
    requests are refused beyond."""
    sched, sim = scenario.scheduler, scenario.simulator
    serve = plan.serve
    tokens, seqs, _ = batch
    return tuple(SchedulerConfig(
        policy=p, max_num_batched_tokens=tokens,
        max_num_seqs=seqs, block_size_tokens=serve.block_size_tokens,
        watermark=sched.watermark, preemption_mode=sched.preemption_mode,
        prefix_caching=sched.enable_prefix_caching, speculation=speculation,
        scheduling=sched.scheduling_policy, seed=sim.seed,
        concurrency=scenario.workload.max_concurrency,
        num_scheduler_steps=sched.num_scheduler_steps,
        state_blocks=state_blocks(plan, serve.block_size_tokens, draft),
        max_model_len=max_model_len(plan),
        offload_tokens=plan.kv_offload.tokens if plan.kv_offload else 0)
        for p in sim.policies)


def max_model_len(plan: Plan) -> int | None:
    """The context every request must fit, prompt and output together: the one the plan was
    made for (--max-model-len, else the model's max_position_embeddings); None when the plan
    is of explicit live lengths, which set no limit."""
    return None if plan.serve.lengths else plan.serve.context_tokens


def check_fixed_shape(scenario: Scenario, limit: int | None) -> None:
    """A fixed shape (--input-len/--output-len) whose every request would be refused for
    max_model_len is a mistake in the flags, not a run of rejections."""
    w = scenario.workload
    if limit is None or w.input_len is None or w.output_len is None \
            or w.input_len + w.output_len <= limit:
        return
    raise SpecError("--input-len/--output-len", f"{w.input_len}/{w.output_len}",
                    f"prompt + output at most max_model_len, {limit:,} tokens (--max-model-len,"
                    " else the model's context): vLLM refuses a longer request")


def check_policy(policy: str) -> str:
    """A policy the simulator runs (sim/config.py checks the name), else a SpecError: for a
    command that hands the name on to workers before any config is built."""
    SchedulerConfig(policy=policy)
    return policy


def num_blocks(plan: Plan, scenario: Scenario, draft: Plan | None = None) -> int:
    """The ledger's pool (a resident draft's weights and KV taken out of it), or fewer blocks
    when num_gpu_blocks_override caps it; never more than the device holds."""
    ledger_blocks = pool_blocks(plan, plan.serve.block_size_tokens, draft)
    cap = scenario.memory.num_gpu_blocks_override
    if cap is None:
        return ledger_blocks
    if not 1 <= cap <= ledger_blocks:
        raise SpecError("--num-gpu-blocks", cap,
                        f"between 1 and the {ledger_blocks:,} blocks the ledger leaves")
    return cap


def speculation(scenario: Scenario, drafted: Ranked | None = None) -> Speculation | None:
    """A draft model: its own step model on the same device, with the tokens it proposes,
    their acceptance, and the batch size above which decoding runs plainly."""
    spec = scenario.speculative
    if spec.model is None:
        # checked with no draft as well, by the same rule: --acceptance 1.5 or --draft-length
        # 0 was accepted silently (exit 0) unless --draft was given
        Speculation(spec.num_speculative_tokens, spec.acceptance, draft=None)
        return None
    if spec.disable_by_batch_size is not None and spec.disable_by_batch_size < 1:
        raise SpecError("--speculate-max-batch", spec.disable_by_batch_size,
                        "a batch size >= 1")
    drafted = drafted or draft_rank(scenario)
    draft = steps.coefficients(drafted, draft_scenario(scenario))
    return Speculation(spec.num_speculative_tokens, spec.acceptance, draft,
                       spec.disable_by_batch_size)


def draft_scenario(scenario: Scenario) -> Scenario:
    """The target's Scenario for the draft, less what describes the target alone (the
    engine's host and graph terms are the target step's: a draft shares its iteration)."""
    return with_values(scenario, {"model.name": scenario.speculative.model,
                                  "model.revision": None, "simulator.coefficients": None,
                                  "memory.runtime_peak": None, "simulator.engine": PLAIN,
                                  "scheduler.num_scheduler_steps": 1,
                                  "engine.enforce_eager": False,
                                  "scheduler.async_scheduling": None})


def draft_rank(scenario: Scenario) -> Ranked:
    """The draft model's ranks; a model that cannot be loaded is named as --draft."""
    try:
        return rank(draft_scenario(scenario))
    except SpecError as exc:
        if exc.field == "model":
            raise SpecError("--draft", exc.value, exc.allowed, exc.source) from None
        raise


def fleet(scenario: Scenario) -> Deployment:
    """Replicas behind a router, or disaggregated prefill:decode pools over a KV link."""
    sim = scenario.simulator
    prefill = decode = 0
    if sim.disaggregate:
        parts = sim.disaggregate.split(":")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise SpecError("--disaggregate", sim.disaggregate, "prefill:decode device "
                            "counts, e.g. 1:1 or 2:3")
        prefill, decode = (int(p) for p in parts)
    return Deployment(sim.replicas, sim.router, prefill, decode,
                      parse_bandwidth(sim.kv_transfer, "--kv-transfer"))
