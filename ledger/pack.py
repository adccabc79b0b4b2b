"""Several engine instances on shared GPUs, started one after another: what each holds on each
device under its engine's own reservation rule, the CUDA context each process adds outside it,
what is left, and whether the next one starts in what the earlier ones left.

Each engine's rule, at the source cited:
- vLLM asks ceil(total x gpu_memory_utilization) of the device: a fraction of the TOTAL memory,
  not of what is free (vllm/v1/worker/utils.py request_memory at v0.33.0). From 0.9.2 (V1) it
  refuses to start when less than that is free once its own CUDA context exists
  (vllm_start.checks_free); earlier releases do not check and fail with CUDA out of memory when
  they allocate what is not there. The KV pool is the request less what its own profile
  measured since its baseline (memory_profiling, from the init snapshot): another process's
  memory is not in it (OF_TOTAL).
- The releases whose profile measures device-wide use (VllmRow.profile ALLOCATED: 0.6.4, and
  V1 from 0.8.0 to 0.9.1) count memory other processes hold as their own non-torch memory, so
  a second instance's utilization must cover the first's too (COUNTS_OTHERS): vllm PR 18974,
  'init the first LLM with gpu_memory_utilization=0.45 and the second one
  gpu_memory_utilization=0.9 (as it'll count both)'.
- SGLang's --mem-fraction-static is a fraction of the memory free when it starts, not of the
  total: ModelRunner.init_torch_distributed returns get_available_gpu_memory (the device's free
  memory after its own context and NCCL), which init_memory_pool hands to
  profile_max_num_token as `total_gpu_memory` (sglang python/sglang/srt/model_executor/
  model_runner.py). TensorRT-LLM's free_gpu_memory_fraction is one of the memory free after
  its weights and activations. Both shrink with another process's memory (OF_FREE): it is
  planned as memory outside torch that they see at start."""

from dataclasses import dataclass

from .engines import SGLANG, TRTLLM, VLLM, EngineSpec
from .engines import starts as pool_starts
from .errors import SpecError
from .plan import Plan
from .units import GiB
from .vllm_after import outside_baseline
from .vllm_row import ALLOCATED
from .vllm_start import checks_free, requested_bytes

OF_TOTAL = "of total"  # vLLM: total x gpu_memory_utilization, other processes outside its profile
COUNTS_OTHERS = "counts others"  # vLLM 0.6.4, 0.8.0 - 0.9.1: device-wide use is its own
OF_FREE = "of free"  # SGLang, TensorRT-LLM: a fraction of what is free when it starts
RULES = {
    OF_TOTAL: "total x gpu_memory_utilization; other processes' memory outside its budget",
    COUNTS_OTHERS: "total x gpu_memory_utilization, other processes' memory counted inside it "
                   "(its profile measures device-wide use)",
    OF_FREE: "a fraction of the memory free when it starts",
}
OUTSIDE_BUDGET = ("kv_pool_spare", "safety")  # the pool's unused blocks, the engine's headroom


def rule(engine: EngineSpec) -> str:
    """Which of the rules above the engine's budget follows."""
    if engine.name == VLLM:
        return COUNTS_OTHERS if engine.vllm_row.profile == ALLOCATED else OF_TOTAL
    if engine.name in (SGLANG, TRTLLM):
        return OF_FREE
    raise SpecError("engine", engine.name, "vllm, sglang or trtllm: pack applies an engine's "
                    "reservation rule (plain reserves a safety share, no engine's budget)")


def counted_others(engine: EngineSpec, others_bytes: int) -> int:
    """The memory other processes hold that this engine's budget takes as its own non-torch
    memory (COUNTS_OTHERS) or as memory not free at start (OF_FREE); none for OF_TOTAL."""
    return 0 if rule(engine) == OF_TOTAL else others_bytes


@dataclass(frozen=True)
class Held:
    """One instance's memory on one device. reserved: inside its engine's budget (vLLM: the
    requested total x utilization; SGLang/TensorRT-LLM: what they keep of the memory they saw
    free); context: the CUDA context (and NCCL communicators) in use before the engine's
    baseline, outside its budget; graphs: CUDA graphs captured after the pool, outside the
    budget (releases that do not subtract them); needed: what the declared load needs (every
    ledger line but the pool's unused blocks and the headroom), the figure a planner that
    sums needs would give."""

    instance: str
    rank: int
    reserved: int
    context: int
    graphs: int
    needed: int
    how: str

    @property
    def total(self) -> int:
        return self.reserved + self.context + self.graphs


def held(instance: str, rank: int, engine: EngineSpec, plan: Plan, others_bytes: int) -> Held:
    """What the rank's ledger holds on its device once the engine has started; others_bytes is
    what the plan counted of other processes (counted_others), not this instance's."""
    amount = {line.key: line.num_bytes for line in plan.lines}
    counted = counted_others(engine, others_bytes)
    reserved = plan.device_bytes - amount["safety"] - counted
    needed = sum(v for k, v in amount.items() if k not in OUTSIDE_BUDGET) - counted
    kind = rule(engine)
    if engine.name != VLLM:
        return Held(instance, rank, reserved, 0, 0, needed,
                    f"{engine.name}: {RULES[kind]} (its CUDA context is in its non-torch line)")
    context, why = outside_baseline(engine.vllm_row, plan.shard, plan.serve)
    graphs = 0 if "cuda_graphs" in amount or plan.after_pool is None \
        else plan.after_pool.graphs_bytes
    util = engine.gpu_memory_utilization or engine.default_utilization
    return Held(instance, rank, reserved, context, graphs, needed,
                f"{engine.vllm_row.name}: gpu_memory_utilization {util:.2f} x total"
                + (", other processes' memory counted inside it" if kind == COUNTS_OTHERS
                   else "") + f"; {why}"
                + (f"; CUDA graphs {graphs / GiB:.2f} GiB captured after the pool, outside "
                   "it (estimate)" if graphs else ""))


def refusal(engine: EngineSpec, plan: Plan, free_bytes: int, hold: Held,
            counted: int = 0) -> str | None:
    """Why the instance does not start (refusal_of), with what its budget counted of the
    earlier instances where it counts them."""
    why = refusal_of(engine, plan, free_bytes, hold)
    if why is None or not counted:
        return why
    whose = "its budget counts" if rule(engine) == COUNTS_OTHERS else "it sees"
    return why + (f"; {whose} the {gib(counted)} GiB the earlier instances hold"
                  + (f" ({engine.vllm_row.name} measures device-wide use: its utilization "
                     "must cover theirs too)" if rule(engine) == COUNTS_OTHERS else
                     " as not free"))


def refusal_of(engine: EngineSpec, plan: Plan, free_bytes: int, hold: Held) -> str | None:
    """Why the instance does not start where free_bytes are free before its process exists
    (None: it starts): vLLM's free-memory check (from 0.9.2), a pool that holds nothing or
    not one request, what vLLM runs after the pool, the declared load, and what is simply not
    there (CUDA out of memory)."""
    device = plan.device_bytes
    if engine.name == VLLM and checks_free(engine.vllm_row):
        util = engine.gpu_memory_utilization or engine.default_utilization
        requested = requested_bytes(device, util)
        free_at_init = free_bytes - hold.context
        if free_at_init < requested:
            return (f"{engine.vllm_row.name} refuses to start: {gib(free_at_init)} GiB "
                    f"free once its CUDA context exists, below gpu_memory_utilization "
                    f"{util:.2f} x {gib(device)} GiB total = {gib(requested)} GiB (a "
                    f"fraction of the total, not of what is free: at most "
                    f"{max(free_at_init, 0) / device:.3f} would start here)")
    budget = plan.budget
    if budget is not None and (budget.kv_pool_bytes <= 0 or budget.num_gpu_blocks <= 0):
        return (f"no memory left for its KV cache ({gib(budget.kv_pool_bytes)} GiB: "
                f"{budget.how})")
    if budget is not None and not pool_starts(budget, plan.serve.context_tokens):
        return (f"its KV pool of {budget.num_gpu_blocks:,} blocks cannot hold one request of "
                f"max_model_len {plan.serve.context_tokens:,} ({budget.blocks_per_request:,} "
                "blocks)")
    if plan.after_pool is not None and not plan.after_pool.fits:
        return plan.after_pool.sentence()
    if hold.total > free_bytes:
        return (f"it holds {gib(hold.total)} GiB where {gib(free_bytes)} GiB are free: CUDA "
                "out of memory" + (" (this release checks no free memory at startup)"
                                   if engine.name == VLLM else ""))
    if not plan.fits:
        return (f"the declared load does not fit: {plan.memory_ceiling_requests:,} requests of "
                f"{plan.serve.context_tokens:,} tokens fit, {plan.serve.concurrency:,} declared")
    return None


@dataclass(frozen=True)
class DeviceLedger:
    """One device: what each instance holds on it, in start order, and what is left."""

    index: int
    label: str
    device_bytes: int
    held: tuple[Held, ...] = ()

    @property
    def used(self) -> int:
        return sum(h.total for h in self.held)

    @property
    def left(self) -> int:
        return self.device_bytes - self.used

    def with_held(self, hold: Held) -> "DeviceLedger":
        return DeviceLedger(self.index, self.label, self.device_bytes, (*self.held, hold))


def gib(num_bytes: int) -> str:
    return f"{num_bytes / GiB:.2f}"
