"""MoE checkpoints written by transformers run exactly: Mixtral, Qwen3-MoE, DeepSeek-V3 (latent
attention + grouped sigmoid routing), Qwen3-Next (gated DeltaNet + MoE with a gated shared
expert) and gpt-oss (sinks, alternating windows, biased clamped-SwiGLU experts). Greedy tokens
identical and fp32 logits within 1e-5 of transformers, batched, chunked, prefix-cached and
preempted; the weights are the ledger's line to the byte."""

import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_reference import engine_logits, hf_greedy  # noqa: E402
from moe_checkpoints import MOE, save_moe  # noqa: E402

from servecap.ledger.plan import build_plan  # noqa: E402
from servecap.ledger.serve import ServeSpec  # noqa: E402
from servecap.model_configs import load_model  # noqa: E402
from servecap.runtime.engine import Engine, EngineConfig  # noqa: E402
from servecap.runtime.kv_pool import KVPool  # noqa: E402
from servecap.runtime.state_pool import StatePool  # noqa: E402
from servecap.runtime.weights import load_decoder  # noqa: E402

TOLERANCE = 1e-5
NUM_OUTPUT = 5


def _prompts() -> list[list[int]]:
    """Lengths 5 to 21 (past gpt-oss's 8-token window) and one of 70 (past the runtime's
    64-token scan chunk for Qwen3-Next); the first and the last share a 16-token prefix."""
    rng = random.Random(5)
    prompts = [[rng.randrange(256) for _ in range(n)] for n in (21, 5, 13, 70)]
    prompts[3][:16] = prompts[0][:16]
    return prompts


@pytest.fixture(scope="module", params=sorted(MOE))
def checkpoint(request, tmp_path_factory):
    """(spec, runtime model, transformers' tokens and logits per prompt)."""
    directory = tmp_path_factory.mktemp(request.param)
    torch.set_num_threads(1)
    arch = save_moe(transformers, request.param, directory)
    hf = getattr(transformers, arch).from_pretrained(directory).float().eval()
    spec = load_model(str(directory)).spec
    reference = [hf_greedy(hf, p, NUM_OUTPUT) for p in _prompts()]
    return spec, load_decoder(spec, directory, "fp32"), reference


def _engine(model, num_blocks: int = 128, **config) -> Engine:
    states = StatePool(model.spec, 8) if model.spec.state_layers else None
    return Engine(model, KVPool(model.spec, num_blocks, 4, "fp32"), EngineConfig(**config),
                  states)


def _check(engine: Engine, reference, monkeypatch, staggered: bool = False) -> list:
    records, logits = engine_logits(engine, _prompts(), NUM_OUTPUT, monkeypatch, staggered)
    worst = 0.0
    for record, rows, (tokens, expected) in zip(records, logits, reference, strict=True):
        assert record.output_token_ids == tokens
        worst = max(worst, float((rows - expected).abs().max()))
    assert worst < TOLERANCE
    return records


def test_batched_equals_transformers(checkpoint, monkeypatch) -> None:
    _, model, reference = checkpoint
    _check(_engine(model), reference, monkeypatch)


@pytest.mark.parametrize("budget", [8, 5])
def test_chunked_prefill_equals_transformers(checkpoint, monkeypatch, budget) -> None:
    """Prompts in chunks of 8 (or 5) tokens beside batched decodes: each chunk routes its own
    tokens and attends to its context through the pool (sinks and MLA's latent too)."""
    _, model, reference = checkpoint
    _check(_engine(model, max_num_batched_tokens=budget), reference, monkeypatch)


def test_prefix_cached_and_preempted_equal_transformers(checkpoint, monkeypatch) -> None:
    """The last prompt reuses the first's four cached blocks once it has finished (not on
    Qwen3-Next: a cached prefix does not give back its state), and a pool too small for all
    at once preempts and recomputes."""
    spec, model, reference = checkpoint
    records = _check(_engine(model), reference, monkeypatch, staggered=True)
    assert records[3].num_cached_tokens == (0 if spec.state_layers else 16)
    small = _engine(model, num_blocks=22, max_num_batched_tokens=16,
                    reserve_full_context=False)
    records = _check(small, reference, monkeypatch)
    assert any(r.num_preemptions for r in records)


def test_weights_are_the_ledgers(checkpoint) -> None:
    """Every parameter (router, stacked experts, shared experts, sinks, MLA projections) is
    counted by the ledger's inventory: the weights line to the byte."""
    spec, model, _ = checkpoint
    serve = ServeSpec(device_bytes=1 << 30, context_tokens=128, concurrency=1,
                      weight_dtype="fp32", activation_dtype="fp32", runtime_peak_bytes=0)
    assert model.weight_bytes == build_plan(spec, serve).line("weights")
