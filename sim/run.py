"""The event loop: a policy picks each iteration's work, the roofline prices it, time jumps."""

from .config import SchedulerConfig
from .core import Engine, run_iterations
from .roofline import Coefficients
from .sampling import Request
from .state import SimResult
from .static import run_static


def simulate(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
             num_blocks: int) -> SimResult:
    """Run every request to completion (or to config.max_time_s); deterministic."""
    eng = Engine(requests, coef, config, num_blocks)
    advance(eng, config.max_time_s)
    return finish_run(eng)


def advance(eng: Engine, until: float | None) -> None:
    """Run the iterations that start before `until` (None: until every request is done)."""
    if eng.cfg.policy == "static":
        run_static(eng, until)
    else:
        run_iterations(eng, until)


def finish_run(eng: Engine) -> SimResult:
    res = eng.result
    res.end_s, res.decode_end_s = eng.now, res.decode_end_s
    # the counters the engine added up (sim/engine.py)
    res.num_iterations, res.busy_s = eng.num_iterations, eng.busy_s
    res.queue_area, res.system_area = eng.queue_area, eng.system_area
    res.peak_used_blocks = eng.pool.peak_used
    res.num_arrived = eng.next_arrival
    res.unheld_blocks = eng.pool.free + sum(eng.pool.group_blocks.values())
    return res
