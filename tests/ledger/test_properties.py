"""Hypothesis properties of the ledger: monotone ceilings, never above the device."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.plan import build_plan
from servecap.ledger.serve import MAX_CONCURRENCY, ServeSpec
from servecap.ledger.units import GiB, MiB
from servecap.model_configs import load_model

SPECS = [load_model(n).spec for n in ("llama-3.1-8b", "gemma-2-9b-it", "deepseek-v3",
                                      "gpt-oss-20b", "teaching-7b")]

serves = st.builds(
    ServeSpec,
    device_bytes=st.integers(1 * GiB, 2000 * GiB),
    context_tokens=st.integers(1, 200_000),
    concurrency=st.integers(1, 512),
    block_size_tokens=st.sampled_from([1, 8, 16, 32, 128]),
    runtime_peak_bytes=st.integers(0, 20 * GiB),
    safety_bytes=st.integers(0, 20 * GiB),
    kv_dtype=st.sampled_from(["bf16", "fp8", "int4"]),
)
specs = st.sampled_from(SPECS)
more = st.integers(1, 100_000)


@settings(max_examples=150, deadline=None)
@given(specs, serves, more)
def test_ceiling_never_rises_with_context(spec, serve, extra) -> None:
    longer = replace(serve, context_tokens=serve.context_tokens + extra)
    assert (build_plan(spec, longer).memory_ceiling_requests
            <= build_plan(spec, serve).memory_ceiling_requests)


@settings(max_examples=150, deadline=None)
@given(specs, serves, more)
def test_ceiling_never_rises_with_concurrency(spec, serve, extra) -> None:
    busier = replace(serve, concurrency=min(serve.concurrency + extra, MAX_CONCURRENCY))
    assert (build_plan(spec, busier).memory_ceiling_requests
            <= build_plan(spec, serve).memory_ceiling_requests)


@settings(max_examples=150, deadline=None)
@given(specs, serves, st.integers(1, 10 * GiB), st.sampled_from(["runtime", "safety"]))
def test_ceiling_never_rises_with_runtime_peak_or_safety(spec, serve, extra, which) -> None:
    if which == "runtime":
        bigger = replace(serve, runtime_peak_bytes=serve.runtime_peak_bytes + extra)
    else:
        bigger = replace(serve, safety_bytes=serve.safety_bytes + extra)
    assert (build_plan(spec, bigger).memory_ceiling_requests
            <= build_plan(spec, serve).memory_ceiling_requests)


@settings(max_examples=200, deadline=None)
@given(specs, serves)
def test_a_plan_that_fits_never_commits_more_than_the_device(spec, serve) -> None:
    plan = build_plan(spec, serve)
    if plan.fits:
        assert plan.committed_bytes <= plan.device_bytes
        assert plan.memory_ceiling_requests >= serve.concurrency
    assert plan.memory_ceiling_requests >= 0


@settings(max_examples=100, deadline=None)
@given(specs, serves)
def test_ceiling_requests_fit_and_one_more_does_not(spec, serve) -> None:
    plan = build_plan(spec, serve)
    n = plan.memory_ceiling_requests
    room = plan.device_bytes - plan.fixed_bytes
    if n:
        assert n * plan.kv_bytes_per_request <= room < (n + 1) * plan.kv_bytes_per_request


def test_units_mib_and_gib_are_binary() -> None:
    assert (MiB, GiB) == (2**20, 2**30)
