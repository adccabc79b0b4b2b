"""Properties of the step model: more work never takes less time."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servecap.sim.roofline import Coefficients
from servecap.sim.step_model import experts_touched_share, prefill_pairs, step_s

COEF = Coefficients(weights_bytes=16_000_000_000, kv_bytes_per_token=131_072,
                    flops_per_token=16_000_000_000, bandwidth_bytes_per_s=3.35e12,
                    flops_per_s=989e12, attention_flops_per_token_pair=524_288,
                    gemm_efficiency=0.8, attention_efficiency=0.4, bandwidth_efficiency=0.8,
                    layer_overhead_s=1.5e-5, num_layers=32, moe_expert_bytes=8_000_000_000,
                    num_experts=64, experts_per_token=4, tensor_parallel_size=2,
                    collective_bytes_per_token=393_216.0, collective_latency_s=1e-4,
                    pipeline_parallel_size=2, pipeline_bytes_per_token=8192.0,
                    pipeline_latency_s=1e-5)

counts = st.integers(min_value=0, max_value=20_000)


@given(counts, counts, counts, st.integers(min_value=1, max_value=5000))
def test_a_step_grows_with_tokens_and_context(prefill, decode, context, more):
    pairs = prefill_pairs(0, prefill)
    base = step_s(COEF, prefill, decode, pairs, context)
    assert step_s(COEF, prefill, decode + more, pairs, context) >= base
    assert step_s(COEF, prefill, decode, pairs, context + more) >= base
    assert step_s(COEF, prefill + more, decode, prefill_pairs(0, prefill + more), context) \
        >= base


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=256),
       st.integers(min_value=1, max_value=16))
def test_experts_touched_is_a_share_growing_with_the_batch(tokens, experts, top_k):
    top_k = min(top_k, experts)
    share = experts_touched_share(tokens, experts, top_k)
    assert 0.0 <= share <= 1.0
    assert experts_touched_share(tokens + 1, experts, top_k) >= share


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=4096))
def test_prefill_pairs_count_a_causal_chunk(computed, chunk):
    assert prefill_pairs(computed, chunk) == sum(computed + i for i in range(1, chunk + 1))


@given(st.integers(min_value=1, max_value=512), st.integers(min_value=0, max_value=2_000_000))
def test_the_hot_path_prices_decode_steps_as_step_s_does(n, live):
    from dataclasses import replace

    from servecap.sim.step_model import decode_pricer

    dense = replace(COEF, pipeline_parallel_size=1, num_experts=0, moe_expert_bytes=0,
                    experts_per_token=0)
    measured = replace(dense, collective_table="h100-sxm-tp4-vllm-pr24111",
                       collective_calls=64, collective_message_bytes_per_token=8192)
    for coef in (dense, COEF, measured, Coefficients(1e9, 1000, 1e9, 1e12, 1e14)):
        assert decode_pricer(coef)(n, live) == pytest.approx(step_s(coef, 0, n, 0, live),
                                                             rel=1e-12)


def test_an_unknown_all_reduce_table_is_refused():
    from dataclasses import replace

    from servecap.ledger.errors import SpecError

    with pytest.raises(SpecError, match="collective_table"):
        replace(COEF, collective_table="h100-made-up")
