"""Per-rank rows of a vLLM log: each rank's (or pipeline stage's) logged pool beside its own
stage's planned pool, and the pool the binding stage logged, which the blocks are checked
against."""

from dataclasses import replace

from .plan import Plan
from .reconcile_row import Row
from .units import GiB
from .vllm_log import LogFacts


def rank_rows(plan: Plan, facts: LogFacts, stages=()) -> list[Row]:
    """One row per rank (or stage) the log printed a pool for, beside that rank's own stage's
    planned pool; vLLM holds every rank to the fewest blocks, the binding stage's."""
    if not facts.rank_pools:
        return []
    least = min(value for _, value in facts.rank_pools)
    rows = []
    for rank, value in facts.rank_pools:
        own = _stage_plan(plan, stages, rank, facts.rank_pools_by_stage)
        label = f"KV pool, {'stage' if facts.rank_pools_by_stage else 'rank'} {rank}"
        advice = ("the smallest pool" if value == least else
                  f"{value - least:.2f} GiB above the smallest")
        if own is plan and len(stages) > 1:
            advice += "; the binding stage: every rank gets its block count"
        rows.append(Row(f"kv_pool_rank{rank}", label, "GiB", own.budget.kv_pool_bytes,
                        round(value * GiB), advice))
    return rows


def _stage_plan(plan: Plan, stages, rank: int, by_stage: bool) -> Plan:
    """The ledger of the stage a logged rank (or stage index) belongs to; the binding one when
    the log names none of the planned ranks."""
    for index, (ranks, stage_plan) in enumerate(stages):
        if (by_stage and rank == index) or (not by_stage and rank in ranks):
            return stage_plan
    return plan


def binding_pool(plan: Plan, facts: LogFacts, stages=()) -> LogFacts:
    """With uneven pipeline stages the smallest logged pool need not be the binding stage's
    (a stage with more layers has bigger blocks): the blocks are checked against the pool the
    binding stage's ranks logged."""
    if len(stages) < 2 or not facts.rank_pools:
        return facts
    logged = [value for rank, value in facts.rank_pools
              if _stage_plan(None, stages, rank, facts.rank_pools_by_stage) is plan]
    return replace(facts, kv_pool_gib=min(logged)) if logged else facts


