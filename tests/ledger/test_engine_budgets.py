"""Engine budgets: vLLM's blocks, cache tokens and max concurrency match its own startup logs
(tests/fixtures/vllm_logs) to the block; SGLang and TensorRT-LLM fractions."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.engines import EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.kv_blocks import (
    V0,
    blocks_per_request,
    kv_cache_groups,
    kv_cache_tokens,
    max_concurrency,
    num_gpu_blocks,
)
from servecap.ledger.model import FULL, SLIDING, Attention, ModelSpec
from servecap.ledger.plan import Overrides, build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import GiB, parse_size
from servecap.ledger.vllm_versions import check_block_size, row
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import load_model


def kv_only(layers, kv_heads, head_dim):
    return ModelSpec("kv-shape", "test", layers, Attention("gqa", kv_heads, kv_heads, head_dim),
                     num_parameters=1)


V011 = row("0.11")  # blocks // groups x block_size tokens, no CUDA-graph estimate


def vllm_plan(spec, pool_bytes, max_model_len, formula="v1", device=80 * GiB, rules=V011):
    serve = ServeSpec(device_bytes=device, context_tokens=max_model_len, concurrency=1,
                      runtime_peak_bytes=0)
    engine = EngineSpec("vllm", kv_cache_memory_bytes=pool_bytes, non_torch_bytes=0,
                        formula=formula, vllm_row=rules)
    weights = Overrides(weights=WeightBytes(0, 0, 0, 0, ""), weights_source="test",
                        per_device=True)
    return build_plan(spec, serve, weights, engine=engine)


# (log, spec, logged blocks, logged tokens, max_model_len, logged concurrency, logged pool GiB)
V1_LOGS = [
    ("v1_qwen3_14b_a100_40gb", lambda: load_model("qwen3-14b").spec, 2_666, 42_656, 32_768,
     "1.30", "6.51"),
    ("v1_qwen3_0p6b_a100", lambda: kv_only(28, 8, 128), 40_759, 652_144, 4_096, "159.21",
     "69.66"),
    ("v1_llama31_8b_eagle_h100", lambda: replace(load_model("llama-3.1-8b").spec, num_layers=33),
     25_633, 410_128, 131_072, "3.13", "51.63"),
]


@pytest.mark.parametrize(("log", "make", "blocks", "tokens", "max_len", "conc", "pool_gib"),
                         V1_LOGS, ids=[row[0] for row in V1_LOGS])
def test_vllm_v1_blocks_tokens_concurrency(log, make, blocks, tokens, max_len, conc, pool_gib):
    spec = make()
    block_bytes = 16 * spec.num_layers * kv_only_bytes(spec)
    # the logged pool (2 decimals) is consistent with exactly the logged number of blocks
    assert f"{blocks * block_bytes / GiB:.2f}" == pool_gib
    for pool in (blocks * block_bytes, (blocks + 1) * block_bytes - 1):
        budget = vllm_plan(spec, pool, max_len).budget
        assert budget.num_gpu_blocks == blocks
        assert budget.kv_cache_tokens == tokens
        assert f"{budget.max_concurrency:.2f}" == conc


def kv_only_bytes(spec):
    return 2 * spec.attention.num_kv_heads * spec.attention.head_dim * 2


@pytest.mark.parametrize(("blocks", "max_len", "conc", "tokens"),
                         [(1_952, 20_000, "1.56", 31_232), (1_478, 29_000, "0.82", 23_648)])
def test_vllm_v0_llama_8b_rtx3090(blocks, max_len, conc, tokens):
    """V0 (0.6.4): '# GPU blocks: N' and concurrency = N x 16 / max_model_len, no ceil."""
    spec = load_model("llama-3.1-8b").spec
    budget = vllm_plan(spec, blocks * 2 * 2**20, max_len, formula=V0).budget
    assert budget.num_gpu_blocks == blocks
    assert budget.kv_cache_tokens == tokens
    assert f"{budget.max_concurrency:.2f}" == conc


def test_v0_concurrency_of_the_16gb_log():
    assert f"{max_concurrency(3852, 0, 40_000, 16, V0):.2f}" == "1.54"


def test_vllm_budget_reproduces_the_profiling_line():
    """vllm PR 10511: 79.22 GiB x 0.90 - 14.96 - 1.79 - 1.26 = 53.29 GiB for KV."""
    spec = load_model("llama-3.1-8b").spec
    serve = ServeSpec(device_bytes=parse_size("79.22GiB"), context_tokens=8192, concurrency=1,
                      runtime_peak_bytes=parse_size("1.26GiB"))
    engine = EngineSpec("vllm", gpu_memory_utilization=0.9, vllm_row=row("0.6.5"),
                        non_torch_bytes=parse_size("1.79GiB"))
    weights = Overrides(weights=WeightBytes(parse_size("14.96GiB"), 0, 0, 0, ""),
                        weights_source="measured", per_device=True)
    plan = build_plan(spec, serve, weights, engine=engine)
    assert f"{plan.budget.kv_pool_bytes / GiB:.2f}" == "53.29"
    assert plan.budget.num_gpu_blocks == plan.budget.kv_pool_bytes // (2 * 2**20)
    assert {x.key for x in plan.lines if x.measured} >= {"weights", "non_torch", "runtime_peak"}
    assert plan.committed_bytes <= plan.device_bytes


def test_vllm_hybrid_groups_gemma2():
    """21 sliding + 21 full layers: two groups of 21; tokens = blocks // 2 x 16; a request
    reserves ceil(L/16) full blocks + ceil(min(W-1+T, L)/16) + 1 window blocks."""
    spec = load_model("gemma-2-9b-it").spec
    groups = kv_cache_groups(spec.attention.layer_kinds)
    assert groups.kinds == (SLIDING, FULL)
    assert groups.group_size_on(tuple(range(42))) == 21
    page = 16 * 2 * 8 * 256 * 2
    budget = vllm_plan(spec, 1000 * page * 21, 8192).budget
    assert budget.num_gpu_blocks == 1000
    assert budget.kv_cache_tokens == 500 * 16
    assert budget.blocks_per_request == 512 + 512 + 1
    assert budget.max_concurrency == 1000 / 1025


def test_vllm_020_prints_tokens_from_the_concurrency():
    """vllm/v1/core/kv_cache_utils.py @v0.20.0: tokens = int(max_concurrency x max_model_len),
    which counts the window groups' capped reservation (0.11 printed 500 x 16 here)."""
    spec = load_model("gemma-2-9b-it").spec
    page = 16 * 2 * 8 * 256 * 2
    budget = vllm_plan(spec, 1000 * page * 21, 8192, rules=row("0.20")).budget
    assert budget.kv_cache_tokens == int(1000 / 1025 * 8192) == 7992


def test_vllm_hybrid_groups_gpt_oss_window_128():
    window = load_model("gpt-oss-20b").spec.attention.sliding_window_tokens
    assert blocks_per_request((SLIDING, FULL), 131_072, 16, window, 8192) == \
        -(-(127 + 8192) // 16) + 1 + 131_072 // 16


def test_vllm_grouping_pads_like_vllm():
    """10 full + 20 sliding -> 3 groups of 10; 13 full + 12 sliding -> 2 groups of 13."""
    kinds = tuple(FULL if i % 3 == 0 else SLIDING for i in range(30))
    assert [len(g) for g in kv_cache_groups(kinds).layers] == [10, 10, 10]
    kinds = tuple(FULL if i % 2 == 0 else SLIDING for i in range(25))
    assert [len(g) for g in kv_cache_groups(kinds).layers] == [13, 12]


def test_num_blocks_floor_and_zero():
    assert num_gpu_blocks(10 * 4096 * 32 - 1, 4096, 32) == 9
    assert num_gpu_blocks(-5, 4096, 32) == 0
    assert kv_cache_tokens(1001, 2, 16) == 500 * 16


def sized_plan(engine, device=80 * GiB):
    engine = replace(engine, vllm_row=V011)
    spec = load_model("llama-3.1-8b").spec
    serve = ServeSpec(device_bytes=device, context_tokens=8192, concurrency=1,
                      runtime_peak_bytes=2 * GiB, block_size_tokens=16)
    weights = Overrides(weights=WeightBytes(15 * GiB, 0, 0, 0, ""), weights_source="m",
                        per_device=True)
    return build_plan(spec, serve, weights, engine=engine)


def test_sglang_fraction_of_memory_free_at_start_minus_weights():
    plan = sized_plan(EngineSpec("sglang", mem_fraction_static=0.8, non_torch_bytes=GiB))
    free_start = 80 * GiB - GiB
    assert plan.budget.kv_pool_bytes == int(free_start * 0.8) - 15 * GiB
    assert plan.budget.kv_cache_tokens == plan.budget.num_gpu_blocks * 16


def test_sglang_default_fraction_by_gpus():
    plan = sized_plan(EngineSpec("sglang", non_torch_bytes=0))
    assert plan.budget.kv_pool_bytes == int(80 * GiB * 0.88) - 15 * GiB


def test_trtllm_fraction_of_memory_free_after_weights():
    plan = sized_plan(EngineSpec("trtllm", free_gpu_memory_fraction=0.5, non_torch_bytes=GiB))
    assert plan.budget.kv_pool_bytes == int((80 - 15 - 2 - 1) * GiB * 0.5)


def test_vllm_utilization_is_a_fraction_of_total():
    plan = sized_plan(EngineSpec("vllm", gpu_memory_utilization=0.5, non_torch_bytes=GiB))
    assert plan.budget.kv_pool_bytes == int(40 * GiB - (15 + 2 + 1) * GiB)
    assert plan.fits


def test_vllm_pool_exhausted_is_a_clear_note():
    plan = sized_plan(EngineSpec("vllm", gpu_memory_utilization=0.2, non_torch_bytes=GiB))
    assert plan.budget.num_gpu_blocks == 0 and not plan.fits
    assert any("no memory left for the KV pool" in note for note in plan.notes)


def test_load_beyond_the_pool_does_not_fit():
    spec = load_model("llama-3.1-8b").spec
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=8192, concurrency=100)
    plan = build_plan(spec, serve, engine=EngineSpec("vllm", kv_cache_memory_bytes=GiB))
    assert plan.budget.num_gpu_blocks == 512 and not plan.fits


def test_bad_engine_and_fraction():
    from servecap.ledger.errors import SpecError
    with pytest.raises(SpecError, match="--engine"):
        EngineSpec("tgi")
    with pytest.raises(SpecError, match="gpu-memory-utilization"):
        EngineSpec("vllm", gpu_memory_utilization=1.5)


@given(pool=st.integers(0, 200 * GiB), layers=st.integers(1, 128),
       page=st.sampled_from([16 * 131_072 // 32, 16 * 1152, 16 * 8192]))
def test_blocks_never_exceed_the_pool(pool, layers, page):
    blocks = num_gpu_blocks(pool, page, layers)
    assert blocks * page * layers <= pool < (blocks + 1) * page * layers


@given(blocks=st.integers(0, 10**6), max_len=st.integers(1, 2**20))
def test_v1_concurrency_never_above_v0_for_full_attention(blocks, max_len):
    """V1 rounds each request up to whole blocks, so it never promises more than V0."""
    per_request = blocks_per_request((FULL,), max_len, 16, None, 8192)
    assert max_concurrency(blocks, per_request, max_len, 16) <= \
        max_concurrency(blocks, per_request, max_len, 16, V0) + 1e-9


def test_vllm_comm_buffers_come_out_of_the_pool():
    """A collective-buffer line (here declared with --comm-buffer) is profiled as non-torch
    memory, inside gpu_memory_utilization: the pool gives it up, the headroom does not move
    (releases to 0.10 take their baseline before init_worker_distributed_environment:
    vllm/v1/worker/gpu_worker.py @v0.9.2 init_device)."""
    spec = load_model("llama-3.1-8b").spec
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=8192, concurrency=1,
                      runtime_peak_bytes=GiB)
    from servecap.ledger.kv import Shard
    plans = [build_plan(spec, serve, shard=Shard(2), engine=EngineSpec(
        "vllm", non_torch_bytes=0, comm_buffer_bytes=comm, vllm_row=V011))
        for comm in (0, 2 * GiB)]
    assert plans[0].budget.kv_pool_bytes - plans[1].budget.kv_pool_bytes == 2 * GiB
    assert plans[0].line("safety") == plans[1].line("safety")


def test_declared_cuda_graphs_come_out_of_the_pool():
    base = sized_plan(EngineSpec("vllm", non_torch_bytes=0)).budget.kv_pool_bytes
    plan = sized_plan(EngineSpec("vllm", non_torch_bytes=0, cuda_graph_bytes=GiB))
    assert plan.budget.kv_pool_bytes == base - GiB
    assert plan.line("cuda_graphs") == GiB


@settings(max_examples=40, deadline=None)
@given(util=st.floats(0.3, 1.0), concurrency=st.integers(1, 400),
       engine=st.sampled_from(["vllm", "sglang", "trtllm"]))
def test_a_fitting_engine_plan_never_exceeds_the_device(util, concurrency, engine):
    spec = load_model("llama-3.1-8b").spec
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=8192, concurrency=concurrency)
    knob = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static",
            "trtllm": "free_gpu_memory_fraction"}[engine]
    plan = build_plan(spec, serve, engine=EngineSpec(engine, **{knob: util}))
    if plan.fits:
        assert plan.committed_bytes <= plan.device_bytes
        assert concurrency <= plan.budget.num_gpu_blocks // plan.budget.blocks_per_request


def test_gpu_memory_utilization_given_as_a_percentage_is_rewritten_as_a_fraction():
    from servecap.ledger.errors import SpecError
    with pytest.raises(SpecError, match=r"for 90% write 0\.9"):
        EngineSpec("vllm", gpu_memory_utilization=90)


@pytest.mark.parametrize(("release", "good", "bad"), [
    ("0.6.3", (8, 16, 32), (1, 24, 64)),  # argparse choices {8,16,32} (v0.6.3.post1 docs)
    ("0.9.2", (1, 8, 128), (24, 256)),  # BlockSize = Literal[1, 8, 16, 32, 64, 128]
    ("0.11", (1, 128, 256), (24, 512)),  # vllm/config/cache.py@c1d8642 adds 256
    ("0.21", (16, 48, 1024), (1, 8, 24)),  # any int to CacheConfig; FlashAttention: x16
])
def test_block_sizes_are_the_releases_own(release, good, bad):
    for size in good:
        assert check_block_size(row(release), size) == size
    for size in bad:
        with pytest.raises(SpecError, match=f"--block-size = {size}: vllm>="):
            check_block_size(row(release), size)
