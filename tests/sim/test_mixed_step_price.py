"""The scheduler loop prices a mixed iteration with step_s's own expressions, inlined over
step_model.step_constants: the very float step_s gives, for the loop's source run as Python
and for the compiled loop where the build made it, on the coefficients the simulator meets
(a measured single GPU with async scheduling, tensor parallel all-reduces, eager steps,
hybrid fixed state); pipeline stages and routed experts are left to step_s."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim import core
from servecap.sim import loop as loop_python
from servecap.sim.roofline import Coefficients
from servecap.sim.step_model import prefill_pairs, step_constants, step_s

BASE = Coefficients(weights_bytes=16_060_522_496, kv_bytes_per_token=131_072,
                    flops_per_token=16_060_522_496, bandwidth_bytes_per_s=3_350_000_000_000,
                    flops_per_s=989_400_000_000_000, attention_flops_per_token_pair=524_288,
                    gemm_efficiency=0.806, attention_efficiency=0.425,
                    bandwidth_efficiency=0.794, layer_overhead_s=1.59e-05, num_layers=32,
                    moe_layer_overhead_s=1.02e-05, cpu_step_s=0.002178, cpu_per_seq_s=5.425e-05,
                    cpu_overlap=1.0, graph_max_tokens=512)
VARIANTS = {
    "measured, async": BASE,
    "host after the GPU": replace(BASE, cpu_overlap=0.0),
    "tensor parallel": replace(BASE, tensor_parallel_size=2, collective_bytes_per_token=8192.0,
                               collective_latency_s=2e-5),
    "eager above 512 and prefills": replace(BASE, eager_layer_s=3e-5, graph_prefill=0.0),
    "hybrid state": replace(BASE, state_bytes_per_request=25_165_824),
    "speed of light": replace(BASE, gemm_efficiency=1.0, attention_efficiency=1.0,
                              bandwidth_efficiency=1.0, layer_overhead_s=0.0,
                              moe_layer_overhead_s=0.0, cpu_step_s=0.0, cpu_per_seq_s=0.0,
                              cpu_overlap=0.0),
}
KERNELS = {"python": loop_python}
if core.COMPILED_LOOP is not None:
    KERNELS["compiled"] = core.COMPILED_LOOP


class _Engine:
    def __init__(self, coef: Coefficients) -> None:
        self.coef = coef


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.tuples(st.integers(0, 130_000), st.integers(1, 16_384)),
                       max_size=4),
       decode=st.integers(0, 1024), context=st.integers(0, 4_000_000))
def test_the_inlined_price_is_step_s_to_the_bit(kernel, variant, chunks, decode, context):
    coef = VARIANTS[variant]
    constants = step_constants(coef)
    assert constants is not None
    prefill = sum(chunk for _, chunk in chunks)
    cached = sum(computed for computed, _ in chunks)
    pairs = sum(prefill_pairs(computed, chunk) for computed, chunk in chunks)
    context = context if decode else 0
    want = step_s(coef, prefill, decode, pairs, context, cached)
    got = KERNELS[kernel]._step_s(_Engine(coef), constants, prefill, decode, pairs, context,
                                  cached)
    assert got.hex() == want.hex()


@pytest.mark.parametrize("change", [{"pipeline_parallel_size": 2}, {"num_experts": 8,
                                                                    "experts_per_token": 2},
                                    {"flops_per_token": 1.6e10}, {"cpu_step_s": 0}])
def test_what_the_inlining_does_not_type_goes_to_step_s(change):
    """Pipeline stages and routed experts, or a factor that is not the integer or float the
    C arithmetic holds it as (a float FLOP count, an integer host time)."""
    assert step_constants(replace(BASE, **change)) is None


def test_counts_past_the_caps_go_to_step_s():
    """Products that would pass 2^63 in 64-bit integers are priced by step_s (Python's
    integers), so the loop never wraps."""
    coef = BASE
    huge = 2**61 // coef.kv_bytes_per_token + 1
    want = step_s(coef, 0, 1, 0, huge, 0)
    got = loop_python._step_s(_Engine(coef), step_constants(coef), 0, 1, 0, huge, 0)
    assert got.hex() == want.hex()
