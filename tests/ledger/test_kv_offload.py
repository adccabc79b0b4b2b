"""The host KV tier's arithmetic (ledger/kv_offload.py): vLLM's native split of
--kv-offloading-size over the tp x pp ranks, LMCache's per-rank buffer in 256-token chunks, and
vLLM's refusals, as one-line errors."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servecap.ledger.errors import SpecError
from servecap.ledger.kv_offload import GIB, PAGE, OffloadSpec, offload_tier

LLAMA_8B_TOKEN = 32 * 2 * 8 * 128 * 2  # 131,072 B of KV a token, bf16, one rank


def test_lmcache_issue_2901_holds_409600_tokens_in_50_gib():
    """tests/fixtures/kv_offload/lmcache_2901.txt: TP 1, 50 GB set, 50 GB used, 409,600
    storable tokens."""
    tier = offload_tier(OffloadSpec(50, "lmcache", 1, (0, 19, 0)), LLAMA_8B_TOKEN * 16, 16,
                        LLAMA_8B_TOKEN)
    assert tier.tokens == 409_600 and tier.bytes_per_rank == 50 * GIB
    assert tier.num_chunks == 1_600 and tier.chunk_tokens == 256


def test_lmcache_splits_the_flag_over_the_ranks_and_each_rank_allocates_its_share():
    """vLLM <= 0.19 sets max_local_cpu_size = size / (tp x pp) on each rank; each rank's KV
    per token is its share of the heads, so the tier's tokens do not change with tp."""
    one = offload_tier(OffloadSpec(64, "lmcache", 1, (0, 19, 0)), 0, 16, LLAMA_8B_TOKEN)
    two = offload_tier(OffloadSpec(64, "lmcache", 2, (0, 19, 0)), 0, 16, LLAMA_8B_TOKEN // 2)
    assert two.bytes_per_rank * 2 == one.bytes_per_rank == 64 * GIB
    assert two.tokens == one.tokens


def test_native_counts_blocks_of_every_rank():
    """v0.19: num_blocks = int(size x 2^30) // (worker block bytes x world_size)."""
    block = LLAMA_8B_TOKEN // 2 * 16  # tp 2: one rank's 16-token block
    tier = offload_tier(OffloadSpec(64, "native", 2, (0, 19, 0)), block, 16, 0)
    assert tier.num_chunks == 64 * GIB // (block * 2)
    assert tier.tokens == tier.num_chunks * 16 and tier.bytes_per_rank == tier.num_chunks * block


def test_native_rows_round_to_the_page_from_v0_33():
    odd = 3 * 1000 * 16  # a block that is no whole number of pages
    old = offload_tier(OffloadSpec(1, "native", 1, (0, 25, 0)), odd, 16, 0)
    new = offload_tier(OffloadSpec(1, "native", 1, (0, 33, 0)), odd, 16, 0)
    assert old.chunk_bytes == odd and new.chunk_bytes == -(-odd // PAGE) * PAGE
    assert new.tokens < old.tokens


def test_mla_over_tensor_parallelism_keeps_one_copy_from_v0_33():
    block = 576 * 2 * 61 * 16  # DeepSeek-V3's latent a 16-token block, the same on each rank
    split = offload_tier(OffloadSpec(64, "native", 8, (0, 33, 0)), block, 16, 0)
    one = offload_tier(OffloadSpec(64, "native", 8, (0, 33, 0), replicated=True), block, 16, 0)
    assert 7 * split.tokens < one.tokens <= 8 * split.tokens + 16  # less the page rounding


@given(size=st.floats(0.01, 4096), world=st.sampled_from([1, 2, 4, 8]),
       block=st.integers(1, 1 << 22), backend=st.sampled_from(["native", "lmcache"]))
def test_the_tier_never_holds_more_than_it_was_given(size, world, block, backend):
    release = (0, 33, 0) if backend == "native" else (0, 19, 0)
    tier = offload_tier(OffloadSpec(size, backend, world, release), block, 16,
                        max(block // 16, 1))
    assert tier.bytes_per_rank * world <= size * GIB + world
    assert tier.num_chunks * tier.chunk_bytes <= math.ceil(size * GIB / (
        1 if backend == "native" else world))
    assert tier.tokens == tier.num_chunks * tier.chunk_tokens


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"size_gib": 0}, "a number of GiB > 0"),
    ({"size_gib": float("nan")}, "a number of GiB > 0"),
    ({"size_gib": 8, "backend": "disk"}, "native or lmcache"),
    ({"size_gib": 8, "release": (0, 11, 0)}, "vLLM >= v0.12.0"),
    ({"size_gib": 8, "release": (0, 12, 0)}, "refuses to start"),
    ({"size_gib": 8, "backend": "lmcache", "release": (0, 33, 0)}, "capacity is the server's"),
])
def test_refusals_are_one_line(kwargs, needle):
    with pytest.raises(SpecError) as err:
        OffloadSpec(**kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value)
