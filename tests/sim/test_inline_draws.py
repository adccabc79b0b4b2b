"""The workload's draws written out in sim/sampling.py's loops give the numbers the random
library's own methods give from the same seed (expovariate, lognormvariate, randint, then the
clip to [min_tokens, max_tokens]): if a Python release changes an algorithm, this fails
rather than the workloads drifting from what the library would draw."""

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim.sampling import arrival_times, draw_lengths
from servecap.sim.workload import Arrivals, Lengths

SEEDS = st.integers(min_value=0, max_value=2**32)


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, rate=st.floats(min_value=1e-3, max_value=1e4), count=st.integers(0, 300))
def test_poisson_arrivals_are_the_librarys_expovariate_gaps(seed, rate, count):
    rng = random.Random(seed)
    now, expected = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        expected.append(now)
    rng_got = random.Random(seed)
    assert arrival_times(Arrivals("poisson", rate_per_s=rate), count, rng_got) == expected
    assert rng_got.random() == rng.random()


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, median=st.floats(min_value=1.0, max_value=1e5),
       sigma=st.floats(min_value=0.0, max_value=3.0), low=st.integers(0, 50),
       span=st.integers(0, 10**6), count=st.integers(0, 300))
def test_lognormal_lengths_are_the_librarys_draws_clipped(seed, median, sigma, low, span,
                                                           count):
    rng = random.Random(seed)
    high = low + span
    expected = [min(max(round(rng.lognormvariate(math.log(median), sigma)), low), high)
                for _ in range(count)]
    dist = Lengths("lognormal", median=median, sigma=sigma, min_tokens=low, max_tokens=high)
    rng_got = random.Random(seed)
    assert draw_lengths(dist, count, rng_got) == expected
    assert rng_got.random() == rng.random()  # and leave the stream where the library does


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, first=st.integers(0, 10**6), width=st.integers(0, 10**7),
       low=st.integers(0, 10**6), span=st.integers(0, 10**7), count=st.integers(0, 300))
def test_uniform_lengths_are_the_librarys_randint_clipped(seed, first, width, low, span,
                                                          count):
    rng = random.Random(seed)
    last, high = first + width, low + span
    expected = [min(max(rng.randint(first, last), low), high) for _ in range(count)]
    dist = Lengths("uniform", low=first, high=last, min_tokens=low, max_tokens=high)
    rng_got = random.Random(seed)
    assert draw_lengths(dist, count, rng_got) == expected
    assert rng_got.random() == rng.random()  # and leave the stream where the library does
