"""Paged attention equals a naive contiguous-cache reference (fp32, max abs error < 1e-5)."""

import pytest
import torch

from servecap.ledger import runtime_estimate
from servecap.ledger.model import Attention, ModelSpec
from servecap.runtime.attention import (
    PagedBatch,
    PagedKV,
    PrefillSpan,
    paged_attention,
    prompt_attention,
)
from servecap.runtime.attention_reference import reference_attention
from servecap.runtime.kv_pool import KVPool

HEADS, KV_HEADS, DIM = 4, 2, 16
SPEC = ModelSpec(name="tiny", source="test", num_layers=1,
                 attention=Attention("gqa", HEADS, KV_HEADS, DIM), hidden_size=64,
                 intermediate_size=128, vocab_size=97, model_type="llama")


def _scatter(pool: KVPool, keys: torch.Tensor, values: torch.Tensor, seed: int,
             taken: set[int] | None = None) -> list[int]:
    """Write a contiguous K/V into shuffled blocks not in `taken`; returns the block table."""
    bsz, taken = pool.block_size_tokens, taken if taken is not None else set()
    needed = -(-keys.shape[0] // bsz)
    order = torch.randperm(pool.num_blocks, generator=torch.Generator().manual_seed(seed))
    table = [b for b in order.tolist() if b not in taken][:needed]
    taken.update(table)
    k_cache, v_cache = pool.layer(0)
    for i in range(keys.shape[0]):
        k_cache[:, table[i // bsz], i % bsz] = keys[i]
        v_cache[:, table[i // bsz], i % bsz] = values[i]
    return table


@pytest.fixture(params=[1, 1 << 15], ids=["one-block-groups", "default-groups"])
def group_scores(request, monkeypatch) -> int:
    """The grouped passes: one block per pass (the online softmax across many groups), and
    the default bound (one pass for these sizes)."""
    monkeypatch.setattr(runtime_estimate, "ATTENTION_GROUP_SCORES", request.param)
    return request.param


def _decode(q, pool, tables, lengths, window):
    lens = torch.tensor(lengths)
    return paged_attention(q[:, None], *pool.layer(0), tables, (lens - 1)[:, None], lens,
                           window)[:, 0]


@pytest.mark.parametrize("block_size", [1, 3, 16])
@pytest.mark.parametrize("window", [None, 5])
def test_decode_matches_reference_on_ragged_lengths(block_size: int, window,
                                                    group_scores) -> None:
    torch.manual_seed(block_size)
    lengths = [1, 7, 16, 33]
    pool = KVPool(SPEC, num_blocks=64, block_size_tokens=block_size, kv_dtype="fp32")
    caches = [(torch.randn(n, KV_HEADS, DIM), torch.randn(n, KV_HEADS, DIM)) for n in lengths]
    taken: set[int] = set()
    tables = [_scatter(pool, k, v, i, taken) for i, (k, v) in enumerate(caches)]
    width = max(len(t) for t in tables)
    padded = torch.tensor([t + [pool.null_block] * (width - len(t)) for t in tables])
    q = torch.randn(len(lengths), HEADS, DIM)
    out = _decode(q, pool, padded, lengths, window)
    for i, (k, v) in enumerate(caches):
        ref = reference_attention(q[i:i + 1], k, v, window)
        assert (out[i:i + 1] - ref).abs().max() < 1e-5


@pytest.mark.parametrize("block_size", [2, 5, 16])
@pytest.mark.parametrize("context,chunk", [(1, 1), (9, 4), (40, 40), (40, 13)])
def test_prefill_chunk_matches_reference(block_size: int, context: int, chunk: int,
                                         group_scores) -> None:
    torch.manual_seed(context + chunk)
    pool = KVPool(SPEC, num_blocks=32, block_size_tokens=block_size, kv_dtype="fp32")
    k, v = torch.randn(context, KV_HEADS, DIM), torch.randn(context, KV_HEADS, DIM)
    table = torch.tensor(_scatter(pool, k, v, seed=block_size))
    q = torch.randn(chunk, HEADS, DIM)
    for window in (None, 6):
        positions = torch.arange(context - chunk, context)[None]
        out = paged_attention(q[None], *pool.layer(0), table[None], positions,
                              torch.tensor([context]), window)[0]
        assert (out - reference_attention(q, k, v, window)).abs().max() < 1e-5
        if chunk == context:
            assert (prompt_attention(q, k, v, window) -
                    reference_attention(q, k, v, window)).abs().max() < 1e-5


def test_mixed_step_writes_new_tokens_then_attends() -> None:
    """One step: a decode for sequence A, a 5-token chunk for sequence B; K/V land in slots."""
    torch.manual_seed(0)
    bsz = 4
    pool = KVPool(SPEC, num_blocks=8, block_size_tokens=bsz, kv_dtype="fp32")
    past_a = (torch.randn(6, KV_HEADS, DIM), torch.randn(6, KV_HEADS, DIM))
    table_a = _scatter(pool, *past_a, seed=1)  # 2 blocks, slot 6 free in block table_a[1]
    table_b = [b for b in range(8) if b not in table_a][:2]
    new_k, new_v = torch.randn(6, KV_HEADS, DIM), torch.randn(6, KV_HEADS, DIM)
    slots = [table_a[1] * bsz + 2] + [table_b[i // bsz] * bsz + i % bsz for i in range(5)]
    batch = PagedBatch(torch.tensor(slots), 1, torch.tensor([table_a]), torch.tensor([7]),
                       [PrefillSpan(1, 5, 5, torch.tensor(table_b))])
    q = torch.randn(6, HEADS, DIM)
    out = PagedKV(pool, batch).attend(0, q, new_k, new_v, None)
    ref_a = reference_attention(q[:1], torch.cat([past_a[0], new_k[:1]]),
                                torch.cat([past_a[1], new_v[:1]]))
    ref_b = reference_attention(q[1:], new_k[1:], new_v[1:])
    assert (out[:1] - ref_a).abs().max() < 1e-5
    assert (out[1:] - ref_b).abs().max() < 1e-5
