"""The KV pool is sized by the ledger: bytes per block, blocks per plan, and the null block."""

import pytest
import torch

from servecap.ledger import dtypes
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import kv_bytes_per_request, kv_bytes_per_token
from servecap.ledger.paging import blocks_for
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import MiB
from servecap.runtime.kv_pool import KVPool, block_bytes, blocks_for_plan


@pytest.mark.parametrize("kv_dtype", ["fp32", "bf16", "fp16", "fp8"])
@pytest.mark.parametrize("block_size", [1, 16])
def test_pool_tensor_bytes_are_the_ledgers(kv_dtype: str, block_size: int, tiny_spec) -> None:
    spec = tiny_spec()
    bits = dtypes.lookup(kv_dtype, "kv_dtype").bits
    pool = KVPool(spec, num_blocks=10, block_size_tokens=block_size, kv_dtype=kv_dtype)
    per_block = kv_bytes_per_request(spec, bits, block_size, block_size)
    assert pool.block_bytes == per_block == kv_bytes_per_token(spec, bits) * block_size
    assert pool.tensor_bytes == 11 * per_block  # ten blocks and the null block
    assert pool.usable_bytes == 10 * per_block and pool.null_block_bytes == per_block


@pytest.mark.parametrize("context", [100, 256, 1000])
def test_plan_sized_pool_holds_exactly_the_ledger_ceiling(context: int, tiny_spec) -> None:
    spec = tiny_spec()
    serve = ServeSpec(device_bytes=64 * MiB, context_tokens=context, concurrency=1,
                      weight_dtype="fp32", kv_dtype="fp32", activation_dtype="fp32",
                      runtime_peak_bytes=4 * MiB, safety_bytes=2 * MiB)
    plan = build_plan(spec, serve)
    num_blocks = blocks_for_plan(spec, plan)
    assert num_blocks // blocks_for(context, serve.block_size_tokens) == \
        plan.memory_ceiling_requests > 0
    assert num_blocks * block_bytes(spec, serve.block_size_tokens, "fp32") <= \
        plan.device_bytes - plan.fixed_bytes


def test_unsupported_kv_dtype_and_empty_pool_are_clear_errors(tiny_spec) -> None:
    with pytest.raises(SpecError, match="kv_dtype"):
        KVPool(tiny_spec(), 4, 16, kv_dtype="int8")
    with pytest.raises(SpecError, match="at least one block"):
        KVPool(tiny_spec(), 0, 16, kv_dtype="fp32")


def test_copy_blocks_copies_every_layer_k_and_v(tiny_spec) -> None:
    pool = KVPool(tiny_spec(), 4, 2, kv_dtype="fp32")
    pool.tensor[:, :, :, 1] = torch.randn_like(pool.tensor[:, :, :, 1])
    pool.copy_blocks([(1, 3)])
    assert torch.equal(pool.tensor[:, :, :, 3], pool.tensor[:, :, :, 1])
    assert pool.tensor[:, :, :, 3].abs().sum() > 0


@pytest.mark.parametrize("kv_dtype", ["fp32", "bf16", "fp16", "fp8"])
@pytest.mark.parametrize("weight_dtype", ["fp32", "bf16", "fp16"])
def test_any_kv_dtype_runs_with_any_weight_dtype(kv_dtype, weight_dtype, tiny_spec) -> None:
    """Every pairing serves requests (chunked, so later chunks read the cache back) with the
    pool at the ledger's bytes; a cache in the weights' own dtype changes no token."""
    from servecap.runtime.engine import Engine, EngineConfig
    from servecap.runtime.weights import random_decoder

    model = random_decoder(tiny_spec("mistral"), weight_dtype, seed=2)
    outputs = {}
    for dtype in (kv_dtype, "fp32"):
        pool = KVPool(model.spec, 32, 4, kv_dtype=dtype)
        bits = dtypes.lookup(dtype, "kv_dtype").bits
        assert pool.tensor_bytes == 33 * kv_bytes_per_token(model.spec, bits) * 4
        engine = Engine(model, pool, EngineConfig(max_num_batched_tokens=8))
        records = [engine.add_request(list(range(3, 3 + n)), 4) for n in (5, 13)]
        while engine.has_unfinished():
            engine.step()
        outputs[dtype] = [r.output_token_ids for r in records]
    assert all(len(tokens) == 4 for tokens in outputs[kv_dtype])
    if kv_dtype == weight_dtype:  # K/V held exactly as computed: the same tokens
        assert outputs[kv_dtype] == outputs["fp32"]


def test_fp8_cache_stores_value_over_scale_in_e4m3(tiny_spec) -> None:
    pool = KVPool(tiny_spec(), 2, 4, kv_dtype="fp8")
    x = torch.tensor([0.1, -3.0, 448.0, 1000.0])
    assert pool.tensor.dtype == torch.float8_e4m3fn
    assert torch.equal(pool.to_cache(x, "k"), x.to(torch.float8_e4m3fn))
    pool.k_scale = 4.0
    assert torch.equal(pool.to_cache(x, "k").float() * 4.0,
                       (x / 4.0).to(torch.float8_e4m3fn).float() * 4.0)
