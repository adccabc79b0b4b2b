"""One task: every ladder of one layout, priced once and climbed (what a worker runs)."""

import time
from dataclasses import dataclass

from .evaluate import evaluate, price_layout
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
    rows, skipped = [], {}
    for ladder in batch.ladders:
        got, why = climb(list(ladder), lambda c: evaluate(problem, priced, c), prune)
        rows += got
        for reason, count in why.items():
            skipped[reason] = skipped.get(reason, 0) + count
    return {"layout": batch.layout.label, "rows": rows, "skipped": skipped,
            "cpu_s": time.process_time() - started}
