"""A step's per-request work fails alone: a request whose own forward pass raises (here a
token id past the embedding table, planted after admission's checks) or whose sampling
raises ends with status `failed` and its reason, gives its blocks back, and every other
request in the same batches generates exactly what it generates without it."""

from servecap.runtime.engine import Engine, EngineConfig
from servecap.runtime.kv_pool import KVPool
from servecap.runtime.sequence import FAILED, FINISHED

PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16, 17, 18, 19], [20, 21]]


def _engine(model) -> Engine:
    return Engine(model, KVPool(model.spec, 128, 4, "fp32"), EngineConfig())


def _run(engine: Engine) -> None:
    while engine.has_unfinished():
        engine.step()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


def test_a_request_whose_forward_pass_raises_fails_alone(tiny_model) -> None:
    clean = _engine(tiny_model)
    good = [clean.add_request(p, 8) for p in PROMPTS]
    _run(clean)
    engine = _engine(tiny_model)
    records = [engine.add_request(p, 8) for p in PROMPTS]
    poisoned = engine._seqs[records[1].request_id][0]
    poisoned.token_ids[1] = tiny_model.spec.vocab_size + 7  # past the embedding table
    _run(engine)
    assert records[1].status == FAILED and "forward pass failed" in records[1].reason
    others = [r for i, r in enumerate(records) if i != 1]
    assert all(r.status == FINISHED for r in others)
    assert [r.output_token_ids for r in others] == \
        [r.output_token_ids for i, r in enumerate(good) if i != 1]


def test_a_request_whose_sampling_raises_fails_alone(tiny_model) -> None:
    engine = _engine(tiny_model)
    records = [engine.add_request(p, 6, temperature=0.9, seed=i) for i, p in
               enumerate(PROMPTS)]
    bad = engine.add_request([1, 2, 3], 6, temperature=0.9, seed=2**64)  # no torch seed
    _run(engine)
    assert bad.status == FAILED and "sampling failed" in bad.reason
    assert all(r.status == FINISHED and len(r.output_token_ids) == 6 for r in records)
