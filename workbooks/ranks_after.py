"""vLLM's start on the Ranks sheet: what runs after the pool, carried as the plan's values."""

from servecap.ledger.engines import VLLM
from servecap.ledger.ranks import StagePlan
from servecap.ledger.vllm_after import AfterPool, after_pool
from servecap.ledger.vllm_lines import profile_batch

from .source import WorkbookSource

START_NOTE = ("vLLM starts when its pool holds one context_tokens request and, once the pool is "
              "allocated, the CUDA-graph capture and the sampler warm-up fit what is left "
              "(after_pool_room, a formula over this sheet). The capture, the warm-up and what "
              "precedes vLLM's baseline are the plan's estimates{seqs}, carried as values: "
              "edit max_num_seqs or max_num_batched_tokens and servecap plan --from-workbook "
              "recomputes them.")


def plan_after(src: WorkbookSource, item: StagePlan) -> AfterPool | None:
    """The plan's after-pool check on this stage; where the plan skipped it (its pool holds no
    request) the same estimates, so a what-if that makes the pool hold one still checks them."""
    plan = item.plan
    if src.engine.name != VLLM or plan.budget is None:
        return None
    if plan.after_pool is not None:
        return plan.after_pool
    return after_pool(src.spec, plan.serve, plan.shard, src.engine, plan.lines, plan.budget,
                      profile_batch(src.engine, plan.serve))


def after_values(after: AfterPool | None) -> dict[str, int]:
    """The Ranks sheet's value rows (ranks_formulas.AFTER)."""
    if after is None:
        return {}
    return {"after_pool_outside": after.outside_bytes, "after_pool_graphs": after.graphs_bytes,
            "after_pool_warmup": after.warmup_bytes}


def after_known(item: StagePlan, after: AfterPool | None, one_stage: bool) -> dict[str, object]:
    """The cached room and start verdict: the plan's room is at this rank's own blocks, known
    before the binding rank's only with one stage (or where the plan ran the check itself)."""
    if after is None:
        return {}
    out: dict[str, object] = {"starts": item.plan.starts}
    if one_stage or item.plan.after_pool is not None:
        out["after_pool_room"] = after.room_bytes
    return out


def start_note(src: WorkbookSource) -> str:
    seqs = next((a.max_num_seqs for item in src.deployment.stages
                 if (a := plan_after(src, item)) is not None), 0)
    return START_NOTE.format(seqs=f" at max_num_seqs {seqs:,}" if seqs else "")
