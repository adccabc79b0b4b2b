"""One task: every ladder of one layout, priced once and climbed (what a worker runs)."""

import time
from dataclasses import dataclass

from .bound import decode_ceiling_tps, first_feasible, needed_decode_tps, shortest
from .evaluate import Priced, evaluate, price_layout
from .problem import Problem
from .prune import climb
from .space import Candidate, Layout


@dataclass(frozen=True)
class Batch:
    layout: Layout
    ladders: tuple[tuple[Candidate, ...], ...]


def run_batch(problem: Problem, batch: Batch, prune: bool = True) -> dict:
    """Rows of the simulated candidates and the counts skipped by monotonicity.
    Deterministic: the same batch gives the same rows."""
    started = time.process_time()
    priced = price_layout(problem, batch.layout)
    ceiling = layout_ceiling(problem, priced)
    needed = needed_decode_tps(problem.workload, problem.rate_per_s)
    rows, skipped = [], {}
    for ladder in batch.ladders:
        got, why = climb(list(ladder), lambda c: evaluate(problem, priced, c), prune,
                         first_feasible(list(ladder), ceiling, needed) if prune else 0)
        rows += got
        for reason, count in why.items():
            skipped[reason] = skipped.get(reason, 0) + count
    return {"layout": batch.layout.label, "rows": rows, "skipped": skipped,
            "cpu_s": time.process_time() - started}


def layout_ceiling(problem: Problem, priced: Priced) -> float:
    """One replica's decode ceiling (search/bound.py) at the shortest prompt's context."""
    cfg = priced.config
    return decode_ceiling_tps(priced.coef, priced.num_blocks, cfg.block_size_tokens,
                              cfg.max_num_seqs, shortest(problem.workload.prompt) + 1,
                              bool(problem.workload.prefix_groups))
