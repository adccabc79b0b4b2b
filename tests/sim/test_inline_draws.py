"""The workload's draws written out in sim/draws.py's loops give the numbers the random
library's own methods give from the same seed (expovariate, gammavariate, lognormvariate and
round, randint, choices, then the clip to [min_tokens, max_tokens]; a uniform draw against
the cumulative shares), value for value and leaving the generator where the library leaves
it: for that source run as Python and for the compiled kernel where the build made it. If a
Python release changes an algorithm, this fails rather than the workloads drifting from what
the library would draw."""

import math
import random
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim import draws as draws_python
from servecap.sim import sampling
from servecap.sim.sampling import arrival_times, draw_lengths, draw_requests
from servecap.sim.workload import Arrivals, Lengths, PrefixGroup, Tenant, workload_from_dict

SEEDS = st.integers(min_value=0, max_value=2**32)
KERNELS = ["python", pytest.param("compiled", marks=pytest.mark.skipif(
    sampling.COMPILED_DRAWS is None, reason="the draws kernel is not built here"))]


@contextmanager
def drawing_with(kernel: str):
    """sim/sampling.py's draws through the named kernel for the block."""
    module = {"python": draws_python, "compiled": sampling.COMPILED_DRAWS}[kernel]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sampling, "DRAWS", module)
        yield


def test_the_install_draws_with_its_compiled_kernel_where_built():
    """Without SERVECAP_PURE_PYTHON, a kernel built from this source is the one drawing."""
    assert sampling.DRAWS is (sampling.COMPILED_DRAWS or draws_python)


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, rate=st.floats(min_value=1e-6, max_value=1e9), count=st.integers(0, 300))
def test_poisson_arrivals_are_the_librarys_expovariate_gaps(kernel, seed, rate, count):
    rng = random.Random(seed)
    now, expected = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        expected.append(now)
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        got = arrival_times(Arrivals("poisson", rate_per_s=rate), count, rng_got)
    assert [t.hex() for t in got] == [t.hex() for t in expected]
    assert rng_got.random() == rng.random()


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, rate=st.floats(min_value=1e-6, max_value=1e9),
       cv=st.floats(min_value=1e-3, max_value=1e3), count=st.integers(0, 300))
def test_gamma_arrivals_are_the_librarys_gammavariate_gaps(kernel, seed, rate, cv, count):
    rng = random.Random(seed)
    shape = 1.0 / (cv * cv)
    now, expected = 0.0, []
    for _ in range(count):
        now += rng.gammavariate(shape, 1.0 / (rate * shape))
        expected.append(now)
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        got = arrival_times(Arrivals("gamma", rate_per_s=rate, cv=cv), count, rng_got)
    assert [t.hex() for t in got] == [t.hex() for t in expected]
    assert rng_got.random() == rng.random()


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=80, deadline=None)
@given(seed=SEEDS, median=st.floats(min_value=1e-3, max_value=2.0**40),
       sigma=st.floats(min_value=0.0, max_value=10.0), low=st.integers(0, 50),
       span=st.integers(0, 10**6), count=st.integers(0, 300))
def test_lognormal_lengths_are_the_librarys_draws_clipped(kernel, seed, median, sigma, low,
                                                          span, count):
    rng = random.Random(seed)
    high = low + span
    expected = [min(max(round(rng.lognormvariate(math.log(median), sigma)), low), high)
                for _ in range(count)]
    dist = Lengths("lognormal", median=median, sigma=sigma, min_tokens=low, max_tokens=high)
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        got = draw_lengths(dist, count, rng_got)
    assert got == expected and all(type(n) is int for n in got)
    assert rng_got.random() == rng.random()  # and leave the stream where the library does


def _kernel(kernel: str):
    return {"python": draws_python, "compiled": sampling.COMPILED_DRAWS}[kernel]


def _exact_mu(value: float) -> float | None:
    """A mu whose exp (math.exp, libm's) is value itself, if one is."""
    mu = math.log(value)
    for _ in range(8):
        x = math.exp(mu)
        if x == value:
            return mu
        mu = math.nextafter(mu, math.inf if x < value else -math.inf)
    return None


# the halves exp reaches exactly, and the doubles beside them
TIES = {v: mu for v in (k + 0.5 for k in range(400)) if (mu := _exact_mu(v)) is not None}
NEAR = [math.nextafter(mu, side) for mu in list(TIES.values())[:40] for side in (0.0, 99.0)]


@pytest.mark.parametrize("kernel", KERNELS)
def test_lognormal_rounds_as_round_does(kernel):
    """sigma 0 draws exp(mu) itself: at an exact half, round()'s half to even (2.5 -> 2,
    3.5 -> 4); beside one, the nearest integer."""
    assert {math.floor(v) % 2 for v in TIES} == {0, 1}  # halves both ways
    for mu in [*TIES.values(), *NEAR]:
        rng = random.Random(1)
        expected = [round(rng.lognormvariate(mu, 0.0)) for _ in range(2)]
        assert _kernel(kernel).lognormal(random.Random(1), mu, 0.0, 2, 0, 10**6) == expected


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("mu", [709.0, 710.0, math.inf, -math.inf, math.nan])
def test_lognormal_raises_what_the_library_raises(kernel, mu):
    """Past the largest double (math.exp's OverflowError), at infinity (round()'s
    OverflowError) and at NaN (round()'s ValueError): the same error in the same words; the
    stream where the library leaves it."""
    rng = random.Random(5)
    try:
        expected = [min(max(round(rng.lognormvariate(mu, 0.0)), 1), 1 << 53)]
    except (OverflowError, ValueError) as error:
        expected = error
    rng_got = random.Random(5)
    try:
        got = _kernel(kernel).lognormal(rng_got, mu, 0.0, 1, 1, 1 << 53)
    except (OverflowError, ValueError) as error:
        got = error
    assert type(got) is type(expected) and str(got) == str(expected)
    assert rng_got.random() == rng.random()


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, first=st.integers(0, 10**6), width=st.integers(0, 10**7),
       low=st.integers(0, 10**6), span=st.integers(0, 10**7), count=st.integers(0, 300))
def test_uniform_lengths_are_the_librarys_randint_clipped(kernel, seed, first, width, low,
                                                          span, count):
    rng = random.Random(seed)
    last, high = first + width, low + span
    expected = [min(max(rng.randint(first, last), low), high) for _ in range(count)]
    dist = Lengths("uniform", low=first, high=last, min_tokens=low, max_tokens=high)
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        got = draw_lengths(dist, count, rng_got)
    assert got == expected
    assert rng_got.random() == rng.random()  # and leave the stream where the library does


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, first=st.sampled_from([0, 2**53 - 7, 2**53, 2**53 + 1, 2**70]),
       width=st.integers(0, 2**60), top=st.sampled_from([2**53, 2**53 + 1, 2**80]),
       count=st.integers(0, 50))
def test_lengths_at_and_past_2_to_the_53_are_the_librarys(kernel, seed, first, width, top,
                                                         count):
    """Bounds the kernel's 64-bit integers leave to the library's own calls, and those it
    takes up to the edge: the same lengths."""
    rng = random.Random(seed)
    expected = [min(max(rng.randint(first, first + width), 1), top) for _ in range(count)]
    expected += [min(max(round(rng.lognormvariate(math.log(1e15), 3.0)), 1), top)
                 for _ in range(count)]
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        got = draw_lengths(Lengths("uniform", low=first, high=first + width, max_tokens=top),
                           count, rng_got)
        got += draw_lengths(Lengths("lognormal", median=1e15, sigma=3.0, max_tokens=top),
                            count, rng_got)
    assert got == expected
    assert rng_got.random() == rng.random()


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, values=st.lists(st.integers(1, 10**5), min_size=1, max_size=8),
       weighted=st.booleans(), low=st.integers(1, 100), span=st.integers(0, 10**5),
       count=st.integers(0, 300))
def test_empirical_lengths_are_the_librarys_choices_clipped(kernel, seed, values, weighted,
                                                            low, span, count):
    weights = tuple(float(i + 1) for i in range(len(values))) if weighted else ()
    rng = random.Random(seed)
    expected = [min(max(n, low), low + span)
                for n in rng.choices(values, weights=weights or None, k=count)]
    dist = Lengths("empirical", values=tuple(values), weights=weights, min_tokens=low,
                   max_tokens=low + span)
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        assert draw_lengths(dist, count, rng_got) == expected
    assert rng_got.random() == rng.random()


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, shares=st.lists(st.floats(0.0, 0.5), max_size=4), count=st.integers(0, 300))
def test_shares_pick_the_first_item_whose_cumulative_share_covers_the_draw(kernel, seed,
                                                                          shares, count):
    items = tuple(PrefixGroup(f"g{i}", 10 + i, share) for i, share in enumerate(shares))
    rng = random.Random(seed)
    expected = []
    for _ in range(count if items else 0):
        u, edge, pick = rng.random(), 0.0, None
        for item in items:
            edge += item.share
            if u < edge:
                pick = item
                break
        expected.append(pick)
    rng_got = random.Random(seed)
    with drawing_with(kernel):
        got = sampling._draw_shares(items, count, rng_got)
    assert got == (expected if items else [None] * count)
    assert all(a is b for a, b in zip(got, expected, strict=False))
    assert rng_got.random() == rng.random()


@pytest.mark.parametrize("seed", [0, 7, 2**31 + 5])
@pytest.mark.parametrize("arrivals", [{"kind": "poisson", "rate_per_s": 8},
                                      {"kind": "gamma", "rate_per_s": 3, "cv": 2.5},
                                      {"kind": "bursts", "burst_size": 4, "interval_s": 2.0,
                                       "spread_s": 0.5}])
def test_the_compiled_and_python_kernels_draw_the_same_requests(seed, arrivals):
    """A whole request list (arrivals, lognormal and uniform lengths, prefix groups and
    tenants, the requests built from them): the same fields to the bit either way, and the
    values a Request built by its own __init__ holds."""
    doc = {"seed": seed, "num_requests": 500, "arrivals": arrivals,
           "prompt_tokens": {"kind": "lognormal", "median": 400, "sigma": 0.9, "max": 6000},
           "output_tokens": {"kind": "uniform", "low": 32, "high": 512},
           "prefix_groups": [{"name": "sys", "tokens": 600, "share": 0.5},
                             {"name": "tools", "tokens": 250, "share": 0.3}],
           "tenants": [{"name": "gold", "share": 0.2, "priority": 0},
                       {"name": "free", "share": 0.7, "priority": 3}]}
    workload = workload_from_dict(doc)
    got = {}
    for kernel in ("python", "compiled") if sampling.COMPILED_DRAWS else ("python",):
        with drawing_with(kernel):
            got[kernel] = draw_requests(workload)
    python = got["python"]
    for other in got.values():
        assert [(r.arrival_s.hex(), r.prompt_tokens, r.output_tokens, r.prefix_group,
                 r.prefix_tokens, r.tenant, r.priority, r.request_id) for r in other] == \
            [(r.arrival_s.hex(), r.prompt_tokens, r.output_tokens, r.prefix_group,
              r.prefix_tokens, r.tenant, r.priority, r.request_id) for r in python]
        assert other == [sampling.Request(r.request_id, r.arrival_s, r.prompt_tokens,
                                          r.output_tokens, r.prefix_group, r.prefix_tokens,
                                          r.tenant, r.priority) for r in python]
    assert {r.prefix_group for r in python} == {"sys", "tools", None}
    assert {(r.tenant, r.priority) for r in python} == {("gold", 0), ("free", 3), (None, 0)}
    assert all(r.prompt_tokens - r.prefix_tokens <= 6000 for r in python)


@pytest.mark.parametrize("kernel", KERNELS)
def test_columns_of_different_lengths_are_refused(kernel):
    with drawing_with(kernel), pytest.raises(ValueError, match="differ in length"):
        sampling._requests([0.0, 1.0], [5, 6], [7], [None, None], [None, None])


def test_tenant_and_group_order_follows_the_items():
    """shares' edges are summed in the items' order: a first item of share 0 is never
    picked, and a second that takes the rest takes every draw."""
    items = (Tenant("never", 0.0), Tenant("all", 1.0))
    assert sampling._draw_shares(items, 50, random.Random(3)) == [items[1]] * 50
