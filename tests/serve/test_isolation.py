"""One bad request hurts nobody else. In the serving loop: a request whose sampling raises
(a seed torch cannot take, a temperature whose softmax is not finite) fails alone while 12
streams beside it complete exactly as in a clean run. Over HTTP: the same poison among 12
streams is a 400 for itself alone."""

import asyncio
import threading

import pytest

from servecap.ledger.serve import ServeSpec
from servecap.model_configs import load_model
from servecap.runtime.engine import Engine
from servecap.runtime.server.prom_metrics import ServerMetrics
from servecap.runtime.server.serving_loop import Generation, ServingLoop

GOOD = [Generation(tuple(range(1, 6 + i)), 12, temperature=0.7 * (i % 2), seed=i)
        for i in range(12)]
POISON = [Generation((1, 2, 3), 12, temperature=0.5, seed=2**64),  # manual_seed overflows
          Generation((4, 5, 6), 12, temperature=1e-300, seed=1)]  # softmax(l / T) is nan


def _run(gens: list[Generation]) -> list[tuple[str, tuple[int, ...], str]]:
    spec = load_model("tiny-llama").spec
    serve = ServeSpec(device_bytes=64 * 2**20, context_tokens=256, concurrency=1)
    engine = Engine.from_spec(spec, serve, num_blocks=128)
    loop = ServingLoop(engine, ServerMetrics("tiny-llama"), max_waiting=64)

    async def collect(stream):
        tokens = []
        while True:
            event = await stream.events.get()
            tokens += event.token_ids
            if event.finish_reason is not None:
                return event.finish_reason, tuple(tokens), event.message

    async def together():
        return await asyncio.gather(*(collect(loop.submit(g)) for g in gens))

    loop.start()
    try:
        out = asyncio.run(together())
        assert loop.alive  # the engine thread lived through the poison
    finally:
        loop.stop()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    return out


def test_a_request_that_raises_inside_sampling_fails_alone() -> None:
    clean = _run(GOOD)
    mixed = _run(GOOD[:6] + POISON + GOOD[6:])
    poisoned = mixed[6:8]
    assert [r for r, _, _ in poisoned] == ["error", "error"]
    assert "sampling failed for this request" in poisoned[0][2]
    assert "not finite" in poisoned[1][2]
    survivors = mixed[:6] + mixed[8:]
    assert all(reason == "length" and len(tokens) == 12 for reason, tokens, _ in survivors)
    assert [t for _, t, _ in survivors] == [t for _, t, _ in clean]  # exactly the clean run


openai = pytest.importorskip("openai")


def test_one_poisoned_request_among_12_streams_is_a_400_for_itself_alone(server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=60)
    results: dict[int, object] = {}

    def stream(i: int) -> None:
        chunks = list(client.completions.create(
            model="tiny-llama", prompt=list(range(1, 8 + i)), max_tokens=24, stream=True,
            temperature=0.8, seed=i, extra_body={"ignore_eos": True, "min_tokens": 24},
            stream_options={"include_usage": True}))
        results[i] = chunks

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for bad in ({"seed": 2**64}, {"seed": -(2**63) - 1}, {"temperature": 1e-300}):
        with pytest.raises(openai.BadRequestError) as refused:
            client.completions.create(model="tiny-llama", prompt=[1, 2, 3], max_tokens=24,
                                      stream=True, **bad)
        assert refused.value.status_code == 400
    for t in threads:
        t.join(90)
    assert sorted(results) == list(range(12))
    for chunks in results.values():
        tokens = [c for c in chunks if c.choices]
        assert len(tokens) == 24 and tokens[-1].choices[0].finish_reason == "length"
        assert chunks[-1].usage.completion_tokens == 24
