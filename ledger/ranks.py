"""One ledger per rank under tensor, pipeline and data parallelism, and the rank that binds."""

from dataclasses import dataclass, replace

from .engines import PLAIN_ENGINE, EngineSpec, with_blocks
from .errors import SpecError
from .experts import ExpertSplit
from .kv import Shard
from .lines import Line
from .model import ModelSpec
from .plan import Overrides, Plan, build_plan
from .serve import ServeSpec
from .sharding import Stage, check_tensor_parallel, stages
from .units import fmt_gib, plural


@dataclass(frozen=True)
class Parallel:
    """vLLM's parallel sizes: tp x pp GPUs per replica, dp replicas; with
    enable_expert_parallel the routed experts are whole on each of the tp x dp ranks."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False

    def __post_init__(self) -> None:
        for field in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise SpecError("--" + field.replace("_", "-"), value, "a whole number >= 1")

    @property
    def world_size(self) -> int:
        """GPUs one replica spans."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def num_devices(self) -> int:
        return self.world_size * self.data_parallel_size


SINGLE = Parallel()
NO_OVERRIDES = Overrides()


@dataclass(frozen=True)
class StagePlan:
    """The ledger of every rank of one pipeline stage (its tensor-parallel peers are identical).
    Global rank = stage x tp + tp_rank, as vLLM numbers them."""

    stage: Stage
    ranks: tuple[int, ...]
    plan: Plan


@dataclass(frozen=True)
class Deployment:
    """Per-stage ledgers, the binding stage and why, and what the replicas multiply."""

    parallel: Parallel
    stages: tuple[StagePlan, ...]
    binding: int
    binding_reason: str

    @property
    def plan(self) -> Plan:
        """The binding rank's ledger: its ceiling is the deployment's per-replica ceiling."""
        return self.stages[self.binding].plan

    @property
    def fits(self) -> bool:
        return all(s.plan.fits for s in self.stages)

    @property
    def weights_bytes_all_devices(self) -> int:
        """Weights + metadata summed over every GPU of every replica."""
        per_replica = sum(len(s.ranks) * (s.plan.line("weights") + s.plan.line("weight_metadata"))
                          for s in self.stages)
        return per_replica * self.parallel.data_parallel_size

    @property
    def total_ceiling_requests(self) -> int:
        """Replicas multiply requests served, not the per-device ceiling."""
        return self.plan.memory_ceiling_requests * self.parallel.data_parallel_size


def build_deployment(spec: ModelSpec, serve: ServeSpec, overrides: Overrides = NO_OVERRIDES,
                     parallel: Parallel = SINGLE, engine: EngineSpec = PLAIN_ENGINE) -> Deployment:
    """Plan each pipeline stage on one of its ranks; vLLM then gives every rank the smallest
    rank's block count, so the binding rank sets everyone's ceiling."""
    tp = parallel.tensor_parallel_size
    experts = _experts(spec, parallel)
    if parallel.world_size > 1 or experts is not None:
        check_tensor_parallel(spec, tp, experts)
    notes = expert_notes(spec, parallel, experts)
    plans = []
    for stage in stages(spec.num_layers, parallel.pipeline_parallel_size):
        layers = None if parallel.pipeline_parallel_size == 1 else stage.layers
        shard = Shard(tp, layers, stage.first, stage.last, experts)
        plan = build_plan(spec, serve, overrides, shard, engine)
        plan = replace(plan, notes=plan.notes + notes) if notes else plan
        ranks = tuple(range(stage.index * tp, (stage.index + 1) * tp))
        plans.append(StagePlan(stage, ranks, plan))
    binding = min(range(len(plans)), key=lambda i: _capacity(plans[i].plan))
    plans = _hold_to_binding(plans, binding, engine)
    return Deployment(parallel, tuple(plans), binding, _reason(plans, binding, parallel))


def _experts(spec: ModelSpec, parallel: Parallel) -> ExpertSplit | None:
    """The routed experts' split when it is not tp's own: over tp x dp ranks (ledger/experts.py);
    None for a dense model or one replica without expert parallelism."""
    tp, dp = parallel.tensor_parallel_size, parallel.data_parallel_size
    if spec.moe is None or (dp == 1 and not parallel.enable_expert_parallel):
        return None
    return ExpertSplit.of(tp, dp, parallel.enable_expert_parallel)


def expert_notes(spec: ModelSpec, parallel: Parallel, split: ExpertSplit | None) -> tuple[str, ...]:
    """What the expert split does, said once: never a silent flag."""
    if parallel.enable_expert_parallel and spec.moe is None:
        return ("--enable-expert-parallel: no MoE layers in this model, so it changes nothing "
                "(vLLM's FusedMoE is where it applies)",)
    if split is None:
        return ()
    experts = spec.moe.num_experts
    if split.expert_parallel:
        most = split.local_experts(experts)
        return (f"expert parallelism over tp x dp = {split.devices} ranks: each holds {most} "
                f"of the {experts} routed experts whole (vLLM's FusedMoE; the binding rank "
                "holds the most); attention and dense layers stay per replica; the EP group's "
                "all-to-all buffers are not counted",)
    return (f"data parallelism: each of the {experts} routed experts is split across tp x dp "
            f"= {split.devices} ranks (vLLM's FusedMoE flattens tp across dp); attention and "
            "dense layers stay per replica",)


def _capacity(plan: Plan) -> tuple[int, int]:
    if plan.budget is not None:
        return plan.budget.num_gpu_blocks, plan.free_bytes
    return plan.memory_ceiling_requests, plan.free_bytes


def _hold_to_binding(plans: list[StagePlan], binding: int, engine: EngineSpec) -> list[StagePlan]:
    """Every rank allocates the binding rank's number of blocks (get_kv_cache_configs)."""
    least = plans[binding].plan.budget
    if least is None or len(plans) == 1:
        return plans
    out = []
    for item in plans:
        held = with_blocks(item.plan.budget, least.num_gpu_blocks,
                           item.plan.serve.context_tokens, engine)
        out.append(replace(item, plan=replace(item.plan, budget=held,
                                              lines=_spare_line_held(item.plan, held),
                                              memory_ceiling_requests=int(held.max_concurrency))))
    return out


def _spare_line_held(plan: Plan, held) -> tuple[Line, ...]:
    """The pool's unused blocks at the held count: blocks this rank could have had but the
    engine does not allocate stay free on the device (they show in 'left')."""
    own = plan.budget.num_gpu_blocks
    if own == held.num_gpu_blocks:
        return plan.lines
    spare = max(held.num_gpu_blocks * held.block_bytes - plan.line("kv_cache"), 0)
    return tuple(
        replace(item, num_bytes=spare, source=f"{held.how}: the binding rank's "
                f"{held.num_gpu_blocks:,} blocks x {held.block_bytes:,} B (this rank's pool "
                f"fits {own:,}; the rest stays free)")
        if item.key == "kv_pool_spare" else item for item in plan.lines)


def _reason(plans: list[StagePlan], binding: int, parallel: Parallel) -> str:
    item = plans[binding]
    plan, stage = item.plan, item.stage
    holds = [f"layers {stage.layers[0]}-{stage.layers[-1]}"]
    holds += ["the embedding"] if stage.first else []
    holds += ["the lm_head"] if stage.last else []
    what = (f"{plan.budget.num_gpu_blocks:,} KV blocks" if plan.budget is not None
            else f"a ceiling of {plural(plan.memory_ceiling_requests, 'request')}")
    weights = plan.line("weights") + plan.line("weight_metadata")
    head = (f"ranks {item.ranks[0]}-{item.ranks[-1]}" if len(item.ranks) > 1
            else f"rank {item.ranks[0]}")
    if len(plans) == 1:
        peers = " (tensor-parallel peers hold equal shards)" if len(item.ranks) > 1 else ""
        return f"{head} binds: {what}{peers}"
    return (f"{head} (stage {stage.index}: {', '.join(holds)}; {fmt_gib(weights)} of weights, "
            f"{fmt_gib(plan.fixed_bytes)} fixed) binds: {what}, the fewest of the "
            f"{parallel.pipeline_parallel_size} stages")


def engine_pool(spec: ModelSpec, serve: ServeSpec, engine: EngineSpec,
                parallel: Parallel = SINGLE, overrides: Overrides = NO_OVERRIDES):
    """The engine's KV pool on the binding rank (blocks, tokens, max concurrency, start), as
    `plan --engine` prints it: what a scheduler simulation sizes its pool from."""
    return build_deployment(spec, serve, overrides, parallel, engine).plan.budget
