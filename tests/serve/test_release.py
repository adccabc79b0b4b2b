"""A long-running server forgets what it has sent: the engine's per-request bookkeeping
(records, sequences, sampling generators) holds only the requests still in flight."""

import asyncio

import pytest

from servecap.ledger.errors import SpecError
from servecap.ledger.serve import ServeSpec
from servecap.model_configs import load_model
from servecap.runtime.engine import Engine
from servecap.runtime.server.prom_metrics import ServerMetrics
from servecap.runtime.server.serving_loop import Generation, ServingLoop


def _engine() -> Engine:
    spec = load_model("tiny-llama").spec
    serve = ServeSpec(device_bytes=64 * 2**20, context_tokens=256, concurrency=1)
    return Engine.from_spec(spec, serve, num_blocks=64)


async def _collect(stream) -> str:
    while True:
        event = await stream.events.get()
        if event.finish_reason is not None:
            return event.finish_reason


def test_a_long_run_keeps_the_engines_bookkeeping_bounded() -> None:
    engine = _engine()
    loop = ServingLoop(engine, ServerMetrics("tiny-llama"), max_waiting=64)
    sizes = []

    async def waves() -> list[str]:
        reasons = []
        for wave in range(10):
            gens = [Generation(tuple(range(1, 10 + i)), 4, temperature=0.5 * (i % 2),
                               seed=wave) for i in range(6)]
            streams = [loop.submit(g) for g in gens]
            with pytest.raises(SpecError, match="KV blocks"):  # refused before admission
                loop.submit(Generation(tuple(range(1, 10)), 10_000))
            reasons += await asyncio.gather(*(_collect(s) for s in streams))
            sizes.append((len(engine.records), len(engine._seqs), len(engine._generators)))
        return reasons

    loop.start()
    try:
        reasons = asyncio.run(waves())
    finally:
        loop.stop()
    assert reasons.count("length") == 60
    assert sizes == [(0, 0, 0)] * 10  # 60 requests served, none kept
    # request ids stay unique after releases (they no longer come from a count of the kept)
    assert engine._next_request_id == 60


def test_a_running_request_cannot_be_released() -> None:
    engine = _engine()
    record = engine.add_request([1, 2, 3], 4)
    with pytest.raises(ValueError, match="still running"):
        engine.release(record.request_id)
    engine.cancel(record.request_id)
    engine.release(record.request_id)
    assert engine.records == [] and not engine._seqs
