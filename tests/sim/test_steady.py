"""Steady state and its intervals against queues with a known answer: M/M/1 (exponential
sojourn times) and M/D/1 (Erlang's waiting-time distribution) through the simulator itself.

Coverage is counted over many seeds. With N seeds and a true 95 % interval the number that
hold the truth is Binomial(N, 0.95), standard deviation sqrt(N x 0.95 x 0.05); the tests
accept 3 of those either side (3.8 points at N = 300, 6.5 at N = 100), so a correct
interval fails about once in 400 runs, and one built as if requests were independent (72 %
for the M/M/1 mean here) or one twice too wide (100 %) fails every time.
"""

import math
import random

import pytest

from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment, run_once
from servecap.sim.intervals import (
    Sorted,
    batch_bounds,
    mean_interval,
    quantile_interval,
    sorted_shares,
)
from servecap.sim.measure import measure
from servecap.sim.metrics import SLO
from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import Request
from servecap.sim.steady import MIN_MEASURED, mser5


def _band(num_seeds: int) -> tuple[float, float]:
    spread = 3 * math.sqrt(num_seeds * 0.95 * 0.05) / num_seeds
    return 0.95 - spread, 0.95 + spread


def _covers(interval, truth) -> bool:
    low, high = interval
    return (low is None or low <= truth) and (high is None or truth <= high)


def test_mm1_sojourn_intervals_hold_the_truth_in_95_percent_of_seeds() -> None:
    """M/M/1 at rho = 0.3 from empty, 3,000 customers a seed (Lindley's recursion): the
    sojourn time is exponential with rate mu - lambda, so its p50, p99 and mean are known."""
    lam, mu, count, seeds = 0.3, 1.0, 3000, 300
    truth = {0.5: math.log(2) / (mu - lam), 0.99: math.log(100) / (mu - lam)}
    hits = {0.5: 0, 0.99: 0, "mean": 0}
    for seed in range(seeds):
        rng, wait, sojourn = random.Random(seed), 0.0, []
        for _ in range(count):
            service = rng.expovariate(mu)
            sojourn.append(wait + service)
            wait = max(0.0, wait + service - rng.expovariate(lam))
        kept = sojourn[mser5(sojourn) or 0:]
        edges = batch_bounds(len(kept))
        parts = [kept[a:b] for a, b in zip(edges, edges[1:], strict=False)]
        whole = Sorted([(v, 1) for v in kept])
        batches = [Sorted([(v, 1) for v in p]) for p in parts]
        for q in truth:
            hits[q] += _covers(quantile_interval(whole, sorted_shares(batches), q), truth[q])
        hits["mean"] += _covers(mean_interval(sum(kept) / len(kept),
                                              [sum(p) / len(p) for p in parts]), 1 / (mu - lam))
    low, high = _band(seeds)
    for name, hit in hits.items():
        assert low <= hit / seeds <= high, (name, hit / seeds)


STEP_S = 0.01
OUTPUT = 3
ONE_AT_A_TIME = SchedulerConfig(policy="continuous", max_num_seqs=1)
FIXED = Coefficients(weights_bytes=0, kv_bytes_per_token=0, flops_per_token=0,
                     bandwidth_bytes_per_s=1, flops_per_s=1, step_overhead_s=STEP_S)


def _md1_wait_quantile(q: float, lam: float, service: float) -> float:
    """M/D/1's waiting time quantile from Erlang's distribution (Crommelin 1932):
    P(W <= t) = (1 - rho) sum_{j <= t/D} (lam (jD - t))^j / j! e^(-lam (jD - t))."""
    rho = lam * service

    def cdf(t: float) -> float:
        return (1 - rho) * sum((lam * (j * service - t)) ** j / math.factorial(j)
                               * math.exp(-lam * (j * service - t))
                               for j in range(int(t / service) + 1))
    low, high = 0.0, service
    while cdf(high) < q:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if cdf(mid) >= q else (mid, high)
    return high


def test_md1_through_the_simulator_holds_the_truth_in_95_percent_of_seeds() -> None:
    """One sequence at a time, every step STEP_S, 3 output tokens: each request is served in
    D = 3 steps, so the engine is M/D/1 at rho = 0.7, TTFT = W + one step and E2E = W + D.
    The measured window (MSER-5 warm-up, the drain cut) and its batch-means intervals hold
    the exact p50 and p99."""
    service, rho, count, seeds = OUTPUT * STEP_S, 0.7, 2000, 100
    lam = rho / service
    truth = {(key, name): (_md1_wait_quantile(q, lam, service) + extra) * 1000
             for key, extra in (("ttft_ms", STEP_S), ("e2e_ms", service))
             for name, q in (("p50", 0.5), ("p99", 0.99))}
    hits = dict.fromkeys(truth, 0)
    steady = 0
    for seed in range(seeds):
        rng, now, requests = random.Random(seed), 0.0, []
        for i in range(count):
            now += rng.expovariate(lam)
            requests.append(Request(i, now, 16, OUTPUT))
        summary = measure("continuous", [run_once(requests, FIXED, ONE_AT_A_TIME, 10**6,
                                                  Deployment())], SLO(), itl=False)
        steady += summary["steady_state"]
        for (key, name), value in truth.items():
            hits[(key, name)] += _covers(summary[f"{key}_ci"][name], value)
    assert steady >= 0.95 * seeds
    low, _ = _band(seeds)
    for name, hit in hits.items():
        assert low <= hit / seeds <= 1.0, (name, hit / seeds)


def test_mser5_cuts_a_known_warm_up_and_refuses_a_trend() -> None:
    rng = random.Random(4)
    ramp = [i / 10 for i in range(100)] + [10 + rng.gauss(0, 1) for _ in range(900)]
    cut = mser5(ramp)
    assert cut is not None and 80 <= cut <= 150
    assert mser5([i + rng.gauss(0, 1) for i in range(1000)]) is None  # still growing
    assert mser5([1.0] * 20) is None  # too short to tell


def _poisson(count: int, rate: float, seed: int = 1) -> list[Request]:
    rng, now, out = random.Random(seed), 0.0, []
    for i in range(count):
        now += rng.expovariate(rate)
        out.append(Request(i, now, 16, OUTPUT))
    return out


def test_a_short_run_is_flagged_and_a_long_one_is_not() -> None:
    config = SchedulerConfig(policy="continuous", max_num_seqs=1)
    short = measure("continuous", [run_once(_poisson(60, 20.0), FIXED, config, 10**6,
                                            Deployment())], SLO())
    long = measure("continuous", [run_once(_poisson(3000, 20.0), FIXED, config, 10**6,
                                           Deployment())], SLO())
    assert not short["steady_state"] and short["steady_state_reason"]
    assert short["measured_requests"] == 60  # no steady state: every request measured
    assert long["steady_state"] and long["steady_state_reason"] is None
    assert MIN_MEASURED <= long["measured_requests"] < 3000
    assert long["warmup_requests"] + long["measured_requests"] + long["drain_requests"] == 3000


def test_each_lifetimes_figure_names_its_window() -> None:
    """A run refused for its candidate window's lifetimes measures every request: the reason
    gives the candidate's figure and says it is the candidate's (candidate_window_lifetimes),
    while window_lifetimes is of the requests measured, here all of them: their arrival span,
    stretched by n / (n - 1), over their mean end-to-end latency."""
    config = SchedulerConfig(policy="continuous", max_num_seqs=32)
    run = run_once(_poisson(200, 0.6 * 32 / (OUTPUT * STEP_S)), FIXED, config, 10**6,
                   Deployment())
    m = measure("continuous", [run], SLO())
    assert not m["steady_state"] and m["measured_requests"] == 200
    seqs = run.seqs
    span = (seqs[-1].req.arrival_s - seqs[0].req.arrival_s) * 200 / 199
    lifetime = sum(s.release_s - s.req.arrival_s for s in seqs) / 200
    assert m["window_lifetimes"] == pytest.approx(span / lifetime, abs=1e-3)
    candidate = m["candidate_window_lifetimes"]
    assert candidate < 10 and round(candidate, 1) != round(m["window_lifetimes"], 1)
    assert m["steady_state_reason"].startswith("the candidate window after the warm-up and "
                                               "the drain, requests ")
    assert f"spans {candidate:.1f} request lifetimes" in m["steady_state_reason"]
    assert f"{m['window_lifetimes']:.1f}" not in m["steady_state_reason"]
    steady = measure("continuous", [run_once(_poisson(3000, 20.0), FIXED, ONE_AT_A_TIME,
                                             10**6, Deployment())], SLO())
    assert steady["steady_state"]
    assert steady["candidate_window_lifetimes"] == steady["window_lifetimes"] >= 10


def test_a_queue_that_grows_through_the_run_is_overloaded() -> None:
    """Offered at 1.5 x what one server serves: the backlog grows as long as requests come."""
    config = SchedulerConfig(policy="continuous", max_num_seqs=1)
    over = measure("continuous", [run_once(_poisson(3000, 1.5 / (OUTPUT * STEP_S)), FIXED,
                                           config, 10**6, Deployment())], SLO())
    under = measure("continuous", [run_once(_poisson(3000, 0.5 / (OUTPUT * STEP_S)), FIXED,
                                            config, 10**6, Deployment())], SLO())
    assert over["overloaded"] and not over["steady_state"]
    assert not under["overloaded"] and under["steady_state"]


@pytest.mark.parametrize("seeds", [1, 3])
def test_seeds_pool_runs_of_a_step_time_spread(seeds) -> None:
    """--seeds N: N runs with step-time draws seeded N ways, measured together."""
    from dataclasses import replace

    from servecap.sim.deploy import run_deployment

    spread = replace(FIXED, step_time_cv=0.2)
    out = run_deployment(_poisson(1500, 0.5 / (OUTPUT * STEP_S)), spread,
                         SchedulerConfig(max_num_seqs=1), 10**6, Deployment(), SLO(),
                         num_seeds=seeds)[0].summary
    assert out["num_runs"] == seeds and out["offered"] == 1500 * seeds
    plain = run_deployment(_poisson(1500, 0.5 / (OUTPUT * STEP_S)), FIXED,
                           SchedulerConfig(max_num_seqs=1), 10**6, Deployment(), SLO(),
                           num_seeds=seeds)[0].summary
    assert plain["num_runs"] == 1  # no spread: one run says it all
