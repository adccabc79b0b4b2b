"""The inverse questions: every answer fits per build_deployment, the next step does not."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger import fit
from servecap.ledger.engines import EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import GiB
from servecap.model_configs import load_model

H100 = 85_028_896_768  # h100-80gb as the driver reports it (servecap devices)
TEACHING = load_model("teaching-7b").spec
LLAMA_8B = load_model("llama-3.1-8b").spec
LLAMA_70B = load_model("llama-3.1-70b-instruct").spec
SEED = ServeSpec(device_bytes=40 * GiB, context_tokens=4096, concurrency=16,
                 runtime_peak_bytes=3 * GiB, safety_bytes=4 * GiB)


def probe_for(spec, serve, field, **kwargs):
    return lambda value: build_deployment(spec, replace(serve, **{field: value}), **kwargs)


def test_most_requests_of_the_seed_case_is_the_plans_ceiling_39():
    result = fit.largest("concurrency", probe_for(TEACHING, SEED, "concurrency"), 1, 65_536)
    assert result.answer.value == 39
    assert result.answer.plan.memory_ceiling_requests == 39
    assert result.beyond.value == 40 and not result.beyond.fits
    assert result.binding.key == "kv_cache"
    # 13.04 weights + 3 peak + 4 safety + 40 x 0.5 GiB KV = 40.04 GiB on a 40 GiB device
    assert result.binding.over_bytes == 14_000_000_000 + 27 * GiB - 40 * GiB


def test_longest_context_for_16_requests_is_whole_blocks():
    """KV is paged: 16 x 638 blocks of 16 tokens fit, the 639th block per request does not."""
    result = fit.largest("context", probe_for(TEACHING, SEED, "context_tokens"), 1, 2**24)
    assert result.answer.value == 638 * 16
    assert result.beyond.value == 638 * 16 + 1
    assert result.beyond.plan.line("kv_cache") == 16 * 639 * 16 * 131_072


def test_nothing_fits_names_the_line_and_the_smallest_candidate():
    tiny = replace(SEED, device_bytes=10 * GiB)
    result = fit.largest("concurrency", probe_for(TEACHING, tiny, "concurrency"), 1, 100)
    assert result.answer is None
    assert result.beyond.value == 1
    assert result.binding.key == "weights"
    assert result.binding.why == "the weights alone exceed the device"


def test_the_search_stops_at_its_range_end():
    result = fit.largest("concurrency", probe_for(TEACHING, SEED, "concurrency"), 1, 20,
                         "20 requests")
    assert result.answer.value == 20 and result.beyond is None
    assert result.range_end == "20 requests"


def test_llama_70b_on_h100_needs_tensor_parallel():
    serve = ServeSpec(device_bytes=H100, context_tokens=8192, concurrency=16)
    result = fit.first("tp", lambda p: build_deployment(LLAMA_70B, serve, parallel=p),
                       [Parallel(t) for t in range(1, 9)], stop=True)
    tp = result.answer.value.tensor_parallel_size
    assert tp >= 2
    assert build_deployment(LLAMA_70B, serve, parallel=Parallel(tp)).fits
    assert not build_deployment(LLAMA_70B, serve, parallel=Parallel(tp // 2)).fits
    # tp 3, 5, 6, 7 do not divide the 64 heads: refused, not planned
    assert [t.value.tensor_parallel_size for t in result.tried if t.refused] == \
        [t for t in (3, 5, 6, 7) if t < tp]
    assert result.beyond.value == Parallel(tp // 2)


def test_fewest_gpus_prefers_the_wider_tensor_group_at_equal_count():
    layouts = fit.device_layouts(8, 80, range(1, 9))
    assert layouts[:4] == [Parallel(1, 1), Parallel(2, 1), Parallel(1, 2), Parallel(3, 1)]
    assert all(a.world_size <= b.world_size for a, b in zip(layouts, layouts[1:], strict=False))


def test_kv_dtypes_are_tried_least_precision_lost_first():
    """docs/fit.md: KV `bf16, fp16, fp8, int8, int4` are all planned; fp16 is as wide as bf16
    and is listed beside it, and int8 beside fp8."""
    assert fit.dtypes_to_try("bf16", fit.KV_DTYPE_ORDER) == (
        "bf16", "fp16", "fp8", "int8", "int4")
    assert fit.dtypes_to_try("fp16", fit.KV_DTYPE_ORDER) == (
        "fp16", "bf16", "fp8", "int8", "int4")
    assert fit.dtypes_to_try("fp8", fit.WEIGHT_DTYPE_ORDER) == ("fp8", "int8", "int4", "fp4")


def test_fp8_kv_is_the_first_that_fits_llama_8b_at_32k():
    serve = ServeSpec(device_bytes=40 * GiB, context_tokens=32_768, concurrency=5,
                      runtime_peak_bytes=2 * GiB)
    order = fit.dtypes_to_try("bf16", fit.KV_DTYPE_ORDER)
    result = fit.first("kv-dtype", probe_for(LLAMA_8B, serve, "kv_dtype"), order)
    assert [t.value for t in result.tried] == ["bf16", "fp16", "fp8", "int8", "int4"]
    assert [t.fits for t in result.tried] == [False, False, True, True, True]
    assert result.answer.value == "fp8" and result.beyond.value == "fp16"
    assert result.binding.key == "kv_cache"


def test_every_candidate_refused_is_bad_input():
    with pytest.raises(SpecError, match="states no architecture"):
        fit.first("tp", lambda p: build_deployment(TEACHING, SEED, parallel=p),
                  [Parallel(2), Parallel(4)])


def test_the_engines_pool_binds_with_vllm():
    serve = ServeSpec(device_bytes=H100, context_tokens=8192, concurrency=1)
    engine = EngineSpec(name="vllm")
    result = fit.largest("concurrency", probe_for(LLAMA_8B, serve, "concurrency", engine=engine),
                         1, 65_536)
    assert result.answer.value == result.answer.plan.memory_ceiling_requests
    assert "KV blocks" in result.binding.why


@settings(max_examples=40, deadline=None)
@given(device_gib=st.integers(16, 200), concurrency=st.integers(1, 64),
       context=st.integers(1, 40_000), safety_gib=st.integers(0, 8),
       block=st.sampled_from([1, 16, 32]), spec=st.sampled_from([TEACHING, LLAMA_8B]))
def test_answers_fit_and_the_next_value_does_not(device_gib, concurrency, context, safety_gib,
                                                   block, spec):
    serve = ServeSpec(device_bytes=device_gib * GiB, context_tokens=context,
                      concurrency=concurrency, block_size_tokens=block,
                      runtime_peak_bytes=GiB, safety_bytes=safety_gib * GiB)
    for field, high in (("context_tokens", 2**20), ("concurrency", 65_536)):
        result = fit.largest(field, probe_for(spec, serve, field), 1, high)
        if result.answer is not None:
            assert build_deployment(spec, replace(serve, **{field: result.answer.value})).fits
        if result.beyond is not None:
            assert not build_deployment(spec, replace(serve, **{field: result.beyond.value})).fits
            if result.answer is not None:
                assert result.beyond.value == result.answer.value + 1
