"""vLLM's hybrid page arithmetic against real startup logs
(tests/fixtures/vllm_logs/v1_qwen36_35b_a3b_*) and a hand derivation (docs/hybrid.md);
properties of every new cache kind."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.engines import EngineSpec
from servecap.ledger.plan import Overrides, build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.state import state_bytes_per_request
from servecap.ledger.units import GiB
from servecap.ledger.vllm_log import parse_vllm_log
from servecap.ledger.vllm_versions import row
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONFIGS = FIXTURES / "configs"
NO_WEIGHTS = Overrides(weights=WeightBytes(0, 0, 0, 0, ""), weights_source="test",
                       per_device=True)


def spec_of(name: str):
    return load_model(str(CONFIGS / name / "config.json")).spec


def vllm_pool_plan(spec, pool_bytes: int, max_model_len: int, kv_dtype: str = "bf16",
                   mode: str = "align", release: str = "0.21.0", device: str = ""):
    """The pool under one release's rules (0.21.0: the rules these tests derive by hand; the
    later ones are tests/ledger/test_vllm_releases.py's)."""
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=max_model_len, concurrency=1,
                      runtime_peak_bytes=0, kv_dtype=kv_dtype, mamba_cache_mode=mode,
                      device_label=device)
    engine = EngineSpec("vllm", kv_cache_memory_bytes=pool_bytes, non_torch_bytes=0,
                        vllm_row=row(release))
    return build_plan(spec, serve, NO_WEIGHTS, engine=engine)


@pytest.mark.parametrize("log", ["v1_qwen36_35b_a3b_nvfp4_5090_club652.log",
                                 "v1_qwen36_35b_a3b_nvfp4_5090_club612.log"])
def test_gated_deltanet_blocks_and_concurrency_match_vllm_logs(log: str) -> None:
    facts = parse_vllm_log((FIXTURES / "vllm_logs" / log).read_text())
    plan = vllm_pool_plan(spec_of("Qwen--Qwen3.6-35B-A3B"), facts.gib_bytes("kv_pool_gib"),
                          facts.max_model_len, kv_dtype="fp8")
    budget = plan.budget
    # by hand: state 3 x 8,192 x 2 + 32 x 128 x 128 x 4 = 2,146,304 B; attention 1 token
    # 2 x 2 x 256 x 1 = 1,024 B -> block 16 x cdiv(2,146,304, 16 x 1,024) = 2,096 tokens
    assert budget.block_size_tokens == 2096
    assert budget.block_bytes == 2_146_304 * 10  # one page in each of 10 tensors
    assert budget.num_groups == 4  # 10 full layers, 30 state layers in 3 groups of 10
    assert budget.blocks_per_request == -(-131072 // 2096) + 3 * 2  # align: 2 pages a state
    assert budget.num_gpu_blocks == facts.gib_bytes("kv_pool_gib") // 2_146_304 // 10
    assert f"{budget.max_concurrency:.2f}" == f"{facts.max_concurrency:.2f}"
    assert budget.kv_cache_tokens == facts.kv_cache_tokens


def test_mamba2_hybrid_by_hand_nemotron_3_nano() -> None:
    """No public log of a Mamba-2 hybrid states its pool exactly; docs/hybrid.md derives this."""
    cfg = json.loads((CONFIGS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" /
                      "config.json").read_text())
    pattern = cfg["hybrid_override_pattern"]
    attention, mamba = pattern.count("*"), pattern.count("M")
    conv = (4 - 1) * (64 * 64 + 2 * 8 * 128) * 2  # bf16 conv state
    ssm = 64 * 64 * 128 * 4  # mamba_ssm_cache_dtype float32
    one_token = 2 * 2 * 128 * 2
    block = 16 * -(-(conv + ssm) // (16 * one_token))
    page = block * one_token
    group = attention  # 23 Mamba layers >= 1.5 x 6 attention: groups of 6
    pool = 40 * GiB
    plan = vllm_pool_plan(spec_of("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"), pool, 8192)
    assert (attention, mamba) == (6, 23)
    assert plan.state_bytes_per_request == mamba * (conv + ssm)
    assert plan.budget.block_size_tokens == block == 2096
    assert plan.budget.num_groups == 1 + -(-mamba // group)
    assert plan.budget.num_gpu_blocks == pool // page // group
    per_request = -(-8192 // block) + -(-mamba // group) * 2
    assert plan.budget.blocks_per_request == per_request
    assert plan.budget.max_concurrency == pool // page // group / per_request


def test_mamba_cache_mode_none_holds_one_page_and_all_one_per_block() -> None:
    spec = spec_of("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    none = vllm_pool_plan(spec, 40 * GiB, 8192, mode="none").budget
    every = vllm_pool_plan(spec, 40 * GiB, 8192, mode="all").budget
    assert none.blocks_per_request == -(-8192 // none.block_size_tokens) + 4
    assert every.block_size_tokens % 256 == 0  # a multiple of the Mamba-2 chunk
    assert every.blocks_per_request == 5 * -(-8192 // every.block_size_tokens)


def test_chunked_local_layers_hold_at_most_a_chunk() -> None:
    spec = spec_of("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    plan = vllm_pool_plan(spec, 40 * GiB, 65536)
    per_layer = 2 * 8 * 128 * 2
    assert plan.kv_bytes_by_kind == {"full": 12 * 65536 * per_layer, "sliding": 0,
                                     "chunked": 36 * 8192 * per_layer}
    # groups: 12 full, 36 chunked -> 4 groups of 12; chunk + T = 16,384 tokens a chunked group
    assert plan.budget.num_groups == 4
    assert plan.budget.blocks_per_request == 65536 // 16 + 3 * (8192 + 8192) // 16


def test_indexer_is_its_own_line_in_its_own_dtype() -> None:
    spec = spec_of("deepseek-ai--DeepSeek-V3.2")
    plan = vllm_pool_plan(spec, 40 * GiB, 8192)
    assert plan.indexer_bytes_per_token == 61 * (128 + 4)
    assert plan.line("indexer_cache") == 8192 * 61 * 132
    page = 16 * 61 * ((512 + 64) * 2 + 132)  # one group: every MLA and indexer page
    assert plan.budget.num_gpu_blocks == 40 * GiB // page


KINDS = ["Qwen--Qwen3.6-35B-A3B", "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
         "meta-llama--Llama-4-Scout-17B-16E-Instruct", "deepseek-ai--DeepSeek-V3.2",
         "google--gemma-4-26B-A4B"]
SPECS = {name: spec_of(name) for name in KINDS}


def plain(name: str, context: int, concurrency: int, engine: str = "plain"):
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=context, concurrency=concurrency,
                      runtime_peak_bytes=GiB)
    return build_plan(SPECS[name], serve, NO_WEIGHTS, engine=EngineSpec(engine))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(KINDS), st.integers(1, 200_000), st.integers(1, 200_000),
       st.integers(1, 64), st.integers(1, 64))
def test_new_kinds_are_monotonic_and_never_above_the_device(name, a, b, n, m) -> None:
    short, long = sorted((a, b))
    few, many = sorted((n, m))
    assert plain(name, short, few).cache_in_use_bytes <= plain(name, long, few).cache_in_use_bytes
    assert plain(name, short, few).cache_in_use_bytes <= plain(name, short, many).cache_in_use_bytes
    assert plain(name, long, few).memory_ceiling_requests <= \
        plain(name, short, few).memory_ceiling_requests
    at_ceiling = plain(name, short, max(plain(name, short, 1).memory_ceiling_requests, 1))
    assert not at_ceiling.fits or at_ceiling.committed_bytes <= at_ceiling.device_bytes
    for engine in ("plain", "vllm"):
        result = plain(name, short, few, engine)
        assert not result.fits or result.committed_bytes <= result.device_bytes


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(KINDS[:2]), st.integers(1, 500_000), st.integers(1, 500_000))
def test_state_does_not_grow_with_context(name, a, b) -> None:
    assert plain(name, a, 1).state_bytes_per_request == \
        plain(name, b, 1).state_bytes_per_request == state_bytes_per_request(SPECS[name]) > 0


def test_the_step_model_prices_states_as_reads_and_writes_not_context() -> None:
    from servecap.sim.roofline import coefficients_for_plan
    from servecap.sim.step_model import step_s

    plan = plain("Qwen--Qwen3.6-35B-A3B", 8192, 1)
    coef = coefficients_for_plan(plan, 1e12, 1e15)
    assert coef.state_bytes_per_request == plan.state_bytes_per_request > 0
    one = step_s(coef, 0, 1, 0, 1000)
    longer = step_s(coef, 0, 1, 0, 2000)
    # 1,000 more context tokens add only their KV reads; the state is paid once either way
    assert longer - one == pytest.approx(1000 * plan.kv_bytes_per_token / 1e12)
    two = step_s(coef, 0, 2, 0, 2000)
    assert two - longer == pytest.approx((1 * plan.kv_bytes_per_token
                                          + 2 * plan.state_bytes_per_request) / 1e12)


def test_the_simulators_decode_price_keeps_a_dense_hybrids_state() -> None:
    """The decode hot path folds a dense model's constants; a state must not fall out of it."""
    from servecap.sim.roofline import coefficients_for_plan
    from servecap.sim.step_model import decode_pricer, step_s

    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=8192, concurrency=1,
                      runtime_peak_bytes=GiB)
    plan = build_plan(spec_of("nvidia--Nemotron-H-56B-Base-8K"), serve, NO_WEIGHTS)
    coef = coefficients_for_plan(plan, 1e12, 1e15)
    assert coef.num_experts == 0 and coef.state_bytes_per_request > 0
    price = decode_pricer(coef)
    for n, live in ((1, 100), (8, 4000), (64, 100_000)):
        assert price(n, live) == pytest.approx(step_s(coef, 0, n, 0, live))
