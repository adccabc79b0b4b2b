"""Hybrid checkpoints written by transformers run exactly: a Mamba-2 hybrid (Nemotron-H: Mamba-2,
attention and relu2 MLP blocks) and a gated-DeltaNet hybrid (Qwen3-Next: gated DeltaNet and
gated attention layers), greedy tokens identical and fp32 logits within 1e-4 of transformers'
own implementations (their PyTorch fallbacks: no causal-conv1d, mamba-ssm or fla kernels),
batched, chunked, preempted and forked, each request's state in the paged state pool."""

import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_reference import HYBRIDS, engine_logits, hf_greedy, save_hybrid  # noqa: E402

from servecap.ledger.plan import build_plan  # noqa: E402
from servecap.ledger.serve import ServeSpec  # noqa: E402
from servecap.ledger.state import state_bytes_per_request  # noqa: E402
from servecap.model_configs import load_model  # noqa: E402
from servecap.runtime.engine import Engine, EngineConfig  # noqa: E402
from servecap.runtime.kv_pool import KVPool  # noqa: E402
from servecap.runtime.state_pool import StatePool  # noqa: E402
from servecap.runtime.weights import load_decoder  # noqa: E402

TOLERANCE = 1e-4
NUM_OUTPUT = 6

def _prompts(count: int = 4) -> list[list[int]]:
    """Lengths 5..29, and one of 70 that crosses the runtime's 64-token scan chunk."""
    rng = random.Random(5)
    lengths = [5 + 8 * i for i in range(count - 1)] + [70]
    return [[rng.randrange(256) for _ in range(n)] for n in lengths]


@pytest.fixture(scope="module", params=sorted(HYBRIDS))
def checkpoint(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    torch.set_num_threads(1)
    arch = save_hybrid(transformers, request.param, directory)
    hf = getattr(transformers, arch).from_pretrained(directory).float().eval()
    spec = load_model(str(directory)).spec
    return spec, load_decoder(spec, directory, "fp32"), hf


def _engine(model, num_blocks: int = 128, num_slots: int = 8, **config) -> Engine:
    return Engine(model, KVPool(model.spec, num_blocks, 4, "fp32"), EngineConfig(**config),
                  StatePool(model.spec, num_slots))


def _check(engine: Engine, hf, prompts, monkeypatch) -> list:
    records, logits = engine_logits(engine, prompts, NUM_OUTPUT, monkeypatch)
    worst = 0.0
    for record, rows, prompt in zip(records, logits, prompts, strict=True):
        tokens, reference = hf_greedy(hf, prompt, NUM_OUTPUT)
        assert record.output_token_ids == tokens, (len(prompt), record.output_token_ids, tokens)
        worst = max(worst, float((rows - reference).abs().max()))
    assert worst < TOLERANCE
    assert engine.slots.num_free == engine.states.num_slots  # every slot came back
    return records


def test_batched_equals_transformers(checkpoint, monkeypatch) -> None:
    _, model, hf = checkpoint
    engine = _engine(model)
    _check(engine, hf, _prompts(), monkeypatch)
    assert engine.max_state_slots_in_use == 4


@pytest.mark.parametrize("budget", [8, 5])
def test_chunked_prefill_equals_transformers(checkpoint, monkeypatch, budget) -> None:
    """Prompts computed in chunks of 8 (or 5) tokens, each continuing its slot's conv and
    recurrent state, decodes batched beside them."""
    _, model, hf = checkpoint
    _check(_engine(model, max_num_batched_tokens=budget), hf, _prompts(), monkeypatch)


def test_preempted_requests_recompute_their_state(checkpoint, monkeypatch) -> None:
    """A pool too small for all at once: decode growth preempts, the victim gives its slot back
    and later recomputes from a fresh state."""
    _, model, hf = checkpoint
    records = _check(_engine(model, num_blocks=30, reserve_full_context=False), hf, _prompts(),
                     monkeypatch)
    assert any(r.num_preemptions for r in records)


def test_slots_bound_residency_and_forks_copy_the_state(checkpoint, monkeypatch) -> None:
    """Two slots: at most two requests run at once, the rest wait; n = 2 greedy samples fork
    from their parent's state and both give transformers' tokens."""
    _, model, hf = checkpoint
    engine = _engine(model, num_slots=2)
    _check(engine, hf, _prompts(), monkeypatch)
    assert engine.max_resident_requests == 2
    prompt = _prompts()[1]
    record = engine.add_request(prompt, NUM_OUTPUT, n=2)
    while engine.has_unfinished():
        engine.step()
    samples = [r for r in engine.records if r.request_id == record.request_id]
    tokens, _ = hf_greedy(hf, prompt, NUM_OUTPUT)
    assert [r.output_token_ids for r in samples] == [tokens, tokens]


def test_weights_and_state_pages_are_the_ledgers(checkpoint) -> None:
    """Parameter bytes equal the plan's weights line; one slot of the state pool is the
    ledger's state_bytes_per_request, laid out as its line says."""
    spec, model, _ = checkpoint
    serve = ServeSpec(device_bytes=1 << 30, context_tokens=128, concurrency=1,
                      weight_dtype="fp32", activation_dtype="fp32", runtime_peak_bytes=0)
    assert model.weight_bytes == build_plan(spec, serve).line("weights")
    pool = StatePool(spec, 3)
    assert pool.tensor_bytes == 4 * state_bytes_per_request(spec)
    st = spec.state
    assert pool.conv.shape[1:] == (4, st.conv_kernel - 1, st.conv_dim)
    assert pool.recurrent.shape[1:] == (4, st.recurrent_heads, *st.recurrent_shape)


def test_a_batched_pass_that_raises_after_the_state_layers_advances_no_state_twice(
        checkpoint) -> None:
    """A batched decode whose forward pass raises after every layer has advanced its states
    (here once, in the final norm of the first 4-row decode step) is retried request by
    request: the states the failed pass advanced are put back first, so every request still
    generates exactly what a clean run does (a recurrent update applied twice would not)."""
    from servecap.runtime.sequence import FINISHED

    _, model, _ = checkpoint
    prompts = _prompts()
    clean = _engine(model)
    good = [clean.add_request(p, NUM_OUTPUT) for p in prompts]
    while clean.has_unfinished():
        clean.step()
    faults = []

    def fault(_module, args):
        if args[0].shape[0] == len(prompts) and not faults:
            faults.append(1)
            raise RuntimeError("injected fault after the state layers")

    hook = model.model.final_norm.register_forward_pre_hook(fault)
    try:
        engine = _engine(model)
        records = [engine.add_request(p, NUM_OUTPUT) for p in prompts]
        while engine.has_unfinished():
            engine.step()
    finally:
        hook.remove()
    assert faults, "no batched decode step ran"
    assert all(r.status == FINISHED for r in records)
    assert [r.output_token_ids for r in records] == [r.output_token_ids for r in good]
    assert engine.slots.num_free == engine.states.num_slots
