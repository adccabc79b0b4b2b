"""Memory pruning: the ledger's per-rank plan of a layout, and a cache monotone in context."""

from dataclasses import dataclass

from servecap.ledger.devices import find
from servecap.ledger.engines import VLLM, EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Deployment, Parallel, build_deployment
from servecap.ledger.serve import ServeSpec

from .problem import Problem
from .space import Layout


@dataclass(frozen=True)
class MemoryVerdict:
    fits: bool
    reason: str
    deployment: Deployment | None = None


def plan_layout(problem: Problem, layout: Layout, context_tokens: int) -> MemoryVerdict:
    """The binding rank must hold weights, runtime peak, the reserve and the KV of one request
    of context_tokens (vLLM refuses to start otherwise). Planned with vLLM's budget, as
    `plan --engine vllm` plans it: its pool is the one the layout is simulated with."""
    device = find(layout.device)
    serve = ServeSpec(device_bytes=device.usable_bytes, context_tokens=context_tokens,
                      concurrency=1, block_size_tokens=problem.block_size_tokens,
                      safety_fraction=problem.safety_fraction, weight_dtype=layout.weight_dtype,
                      kv_dtype=layout.kv_dtype, max_num_seqs=layout.max_num_seqs,
                      max_num_batched_tokens=layout.max_num_batched_tokens,
                      device_label=layout.device)
    parallel = Parallel(layout.tensor_parallel_size, layout.pipeline_parallel_size)
    moe = problem.spec.moe
    if layout.expert_parallel and (moe is None or moe.num_experts % layout.tensor_parallel_size):
        return MemoryVerdict(False, "invalid: expert parallelism needs a mixture-of-experts "
                             "model whose experts tp divides")
    # the layout's scheduler knobs are what vLLM's profile pass runs, as `plan --engine vllm
    # --max-num-seqs N --max-num-batched-tokens M` plans them
    engine = EngineSpec(VLLM, gpu_memory_utilization=1 - problem.safety_fraction,
                        vllm_row=problem.memory_row, max_num_seqs=layout.max_num_seqs,
                        max_num_batched_tokens=layout.max_num_batched_tokens)
    try:
        deployment = build_deployment(problem.spec_for(layout.weight_dtype), serve,
                                      parallel=parallel, engine=engine)
    except SpecError as exc:  # e.g. tp does not divide the heads
        return MemoryVerdict(False, f"invalid: {exc.allowed}")
    plan = deployment.plan
    if not deployment.fits:
        return MemoryVerdict(False, f"memory: {context_tokens:,}-token request does not fit "
                             f"beside {plan.fixed_bytes / 2**30:,.2f} GiB fixed per rank")
    return MemoryVerdict(True, deployment.binding_reason, deployment)


class MemoryCheck:
    """Memory need grows with the context, max_num_seqs and max_num_batched_tokens (the KV of
    one request; the runtime peak's activations and logits rows), so a layout fails wherever a
    layout of the same device, tp, pp and dtypes failed with none of the three larger. Such a
    layout is failed without a ledger (num_inferred counts them)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.failed: dict[tuple, list[tuple[tuple[int, int, int], str]]] = {}
        self.num_ledgers = 0
        self.num_inferred = 0

    def check(self, layout: Layout, context_tokens: int) -> MemoryVerdict:
        base = (layout.device, layout.tensor_parallel_size, layout.pipeline_parallel_size,
                layout.weight_dtype, layout.kv_dtype)
        size = (context_tokens, layout.max_num_seqs, layout.max_num_batched_tokens)
        for smaller, reason in self.failed.get(base, ()):
            if all(a <= b for a, b in zip(smaller, size, strict=True)):
                self.num_inferred += 1
                return MemoryVerdict(False, reason)
        self.num_ledgers += 1
        verdict = plan_layout(self.problem, layout, context_tokens)
        if not verdict.fits and verdict.reason.startswith("memory"):
            self.failed.setdefault(base, []).append((size, verdict.reason))
        return verdict
