"""The API server's tokenizer micro-batch in the engine's intake (sim/engine.py INTAKE, an
experiment: bench/vllm_latency.py --microbatch-intake): off, the server takes one request
at a time; on, requests that reach it together go on together, a batch after another."""

from dataclasses import replace

import pytest

from servecap.sim import core
from servecap.sim.config import SchedulerConfig
from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import Request

COEF = Coefficients(weights_bytes=1_000_000_000, kv_bytes_per_token=16_384,
                    flops_per_token=1_000_000_000, bandwidth_bytes_per_s=3e12,
                    flops_per_s=900e12, num_layers=24, frontend_s=0.001,
                    frontend_latency_s=0.01)


def _ready(arrivals: list[float], batch: int = 1, window: float = 0.0) -> list[float]:
    """Each request's time into the engine, with INTAKE at (batch, window)."""
    saved = dict(core.INTAKE)
    core.INTAKE.update(batch=batch, window_s=window)
    try:
        eng = core.Engine([Request(i, t, 100, 10) for i, t in enumerate(arrivals)], COEF,
                          SchedulerConfig(), 10_000)
    finally:
        core.INTAKE.update(saved)
    return [s.ready_s for s in eng.seqs]


def test_off_by_default_the_server_takes_one_request_at_a_time() -> None:
    assert core.INTAKE == {"batch": 1, "window_s": 0.0}
    ready = _ready([0.0] * 5)
    assert ready == pytest.approx([0.001 * (k + 1) + 0.01 for k in range(5)])


def test_a_burst_goes_on_in_batches_of_32_each_when_its_last_is_through() -> None:
    ready = _ready([0.0] * 40, batch=32, window=0.002)
    assert ready[:32] == pytest.approx([0.032 + 0.01] * 32)  # full: no wait for the window
    # the rest open a batch at once, which waits for its window and for the server
    assert ready[32:] == pytest.approx([0.032 + 8 * 0.001 + 0.01] * 8)


def test_a_lone_request_waits_the_window_and_a_later_one_opens_its_own_batch() -> None:
    ready = _ready([0.0, 0.0015, 0.5], batch=32, window=0.002)
    assert ready[0] == ready[1] == pytest.approx(0.002 + 2 * 0.001 + 0.01)
    assert ready[2] == pytest.approx(0.5 + 0.002 + 0.001 + 0.01)


def test_without_an_api_server_cost_nothing_is_batched() -> None:
    saved = dict(core.INTAKE)
    core.INTAKE.update(batch=32, window_s=0.002)
    try:
        eng = core.Engine([Request(i, 0.0, 100, 10) for i in range(3)],
                          replace(COEF, frontend_s=0.0, frontend_latency_s=0.0),
                          SchedulerConfig(), 10_000)
    finally:
        core.INTAKE.update(saved)
    assert [s.ready_s for s in eng.seqs] == [0.0, 0.0, 0.0]


def test_the_interpreted_engine_batches_as_the_compiled_one() -> None:
    from servecap.sim import engine as interpreted
    arrivals = [0.0] * 40 + [0.0405, 0.041, 0.2]
    saved = dict(interpreted.INTAKE)
    interpreted.INTAKE.update(batch=32, window_s=0.002)
    try:
        eng = interpreted.Engine([Request(i, t, 100, 10) for i, t in enumerate(arrivals)],
                                 COEF, SchedulerConfig(), 10_000)
    finally:
        interpreted.INTAKE.update(saved)
    assert [s.ready_s for s in eng.seqs] == _ready(arrivals, batch=32, window=0.002)
