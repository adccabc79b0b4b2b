"""The scheduler simulation: conservation, queueing laws, and each policy's trade-off."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecap.ledger.errors import SpecError
from servecap.sim.config import POLICIES, SchedulerConfig
from servecap.sim.metrics import summarize, weighted_quantiles
from servecap.sim.roofline import Coefficients, iteration_s
from servecap.sim.run import simulate
from servecap.sim.sampling import Request
from servecap.sim.state import DONE, REJECTED


def _run(reqs, coef, blocks=4000, **cfg):
    return simulate(reqs, coef, SchedulerConfig(**cfg), blocks)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=st.sampled_from(POLICIES), blocks=st.integers(8, 400),
       seed=st.integers(0, 10_000), swap=st.booleans(), caching=st.booleans(),
       budget=st.sampled_from([64, 256, 2048]), horizon=st.sampled_from([None, 5.0]))
def test_conservation(teaching, make_requests, policy, blocks, seed, swap, caching, budget,
                      horizon):
    """Every arrival completes, is rejected with a reason, or is still queued; every completed
    request got exactly the tokens it asked for, in time order, after its arrival."""
    reqs = make_requests(rate=20, n=60, seed=seed, output={"kind": "uniform", "low": 1,
                                                           "high": 120},
                         prefix_groups=[{"name": "sys", "tokens": 40, "share": 0.6}])
    res = _run(reqs, teaching, blocks, policy=policy, block_size_tokens=16,
               max_num_batched_tokens=budget, max_num_seqs=16,
               preemption_mode="swap" if swap else "recompute", prefix_caching=caching,
               max_time_s=horizon)
    summary = summarize(res)
    arrived = summary["completed"] + summary["rejected"] + summary["queued"]
    assert arrived + summary["not_arrived"] == len(reqs)
    assert all(s.req.arrival_s > res.end_s for s in res.seqs[arrived:])
    for seq in res.seqs:
        if seq.state == DONE:
            times = seq.token_times(res.decode_end_s)
            assert seq.generated == seq.req.output_tokens == len(times)
            assert times == sorted(times) and times[0] >= seq.req.arrival_s
            assert seq.release_s >= times[-1]
        elif seq.state == REJECTED:
            assert seq.reason
    if horizon is None:
        assert summary["queued"] == summary["not_arrived"] == 0
        assert res.peak_used_blocks <= blocks
        assert res.unheld_blocks == blocks  # every private block came back


def test_littles_law_on_the_queue_and_the_system(teaching, make_requests):
    """L = lambda W: the engine's time-integrated queue length equals the sum of the requests'
    queue delays (and likewise for time in system)."""
    res = _run(make_requests(rate=12, n=800), teaching, blocks=3000)
    done = [s for s in res.seqs if s.state == DONE]
    assert len(done) == 800
    waits = sum(s.admitted_s - s.req.arrival_s for s in done)
    stays = sum(s.release_s - s.req.arrival_s for s in done)
    assert waits > 1.0
    assert res.queue_area == pytest.approx(waits, rel=1e-6)
    assert res.system_area == pytest.approx(stays, rel=1e-6)


def test_single_server_matches_m_d_1():
    """One sequence at a time, one output token, fixed prompt: service time D is constant, so
    the mean queue delay is Pollaczek-Khinchine's rho D / (2 (1 - rho))."""
    coef = Coefficients(weights_bytes=10**9, kv_bytes_per_token=0, flops_per_token=0,
                        bandwidth_bytes_per_s=1e11, flops_per_s=1e15, step_overhead_s=0.0)
    service = iteration_s(coef, 100, 0)
    rho = 0.6
    import random
    rng, now, reqs = random.Random(11), 0.0, []
    for i in range(40_000):
        now += rng.expovariate(rho / service)
        reqs.append(Request(i, now, 100, 1))
    res = _run(reqs, coef, max_num_seqs=1)
    mean_wait = sum(s.admitted_s - s.req.arrival_s for s in res.seqs) / len(reqs)
    assert mean_wait == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.05)


def test_continuous_beats_static_on_a_mixed_workload(teaching, make_requests):
    reqs = make_requests(rate=3, n=300, output={"kind": "uniform", "low": 4, "high": 400})
    static = summarize(_run(reqs, teaching, policy="static", max_num_seqs=32))
    cont = summarize(_run(reqs, teaching, policy="continuous", max_num_seqs=32))
    assert cont["output_tokens_per_s"] > static["output_tokens_per_s"]
    assert cont["e2e_ms"]["mean"] < 0.5 * static["e2e_ms"]["mean"]


def _long_prompts_among_decodes(make_requests):
    return make_requests(rate=6, n=400,
                         prompt={"kind": "empirical", "values": [64, 4000],
                                 "weights": [0.7, 0.3]},
                         output={"kind": "fixed", "value": 200})


def test_chunked_prefill_lowers_p99_itl(teaching, make_requests):
    reqs = _long_prompts_among_decodes(make_requests)
    whole = summarize(_run(reqs, teaching, blocks=20_000, policy="continuous",
                           max_num_batched_tokens=512))
    chunked = summarize(_run(reqs, teaching, blocks=20_000, policy="chunked-prefill",
                             max_num_batched_tokens=512))
    assert chunked["itl_ms"]["p99"] < 0.5 * whole["itl_ms"]["p99"]
    assert chunked["ttft_ms"]["p99"] > whole["ttft_ms"]["p99"]


def test_decode_priority_preserves_itl_while_queues_age(teaching, make_requests):
    reqs = make_requests(rate=8, n=400)
    prefill = summarize(_run(reqs, teaching, policy="prefill-priority"))
    decode = summarize(_run(reqs, teaching, policy="decode-priority"))
    assert decode["itl_ms"]["p95"] < prefill["itl_ms"]["p95"]
    assert decode["tpot_ms"]["mean"] < prefill["tpot_ms"]["mean"]
    assert decode["queue_ms"]["mean"] > 2 * prefill["queue_ms"]["mean"]


def test_smaller_kv_budget_raises_preemptions(teaching, make_requests):
    reqs = make_requests(rate=10, n=300, output={"kind": "uniform", "low": 100, "high": 600})
    counts = [summarize(_run(reqs, teaching, blocks=b))["preemptions"]
              for b in (6000, 800, 300)]
    assert counts[0] == 0 < counts[1] < counts[2]


def test_prefix_caching_saves_prefill(teaching, make_requests):
    reqs = make_requests(rate=5, n=200, prefix_groups=[{"name": "sys", "tokens": 512,
                                                       "share": 1.0}])
    cached = summarize(_run(reqs, teaching, prefix_caching=True))
    plain = summarize(_run(reqs, teaching, prefix_caching=False))
    assert cached["prefix_hit_tokens"] >= 199 * 512
    assert plain["prefix_hit_tokens"] == 0
    assert cached["ttft_ms"]["mean"] < plain["ttft_ms"]["mean"]


def test_swap_keeps_kv_instead_of_recomputing(teaching, make_requests):
    reqs = make_requests(rate=10, n=200, output={"kind": "uniform", "low": 100, "high": 600})
    swap = summarize(_run(reqs, teaching, blocks=500, preemption_mode="swap"))
    recompute = summarize(_run(reqs, teaching, blocks=500))
    assert swap["preemptions"] > 0 and recompute["preemptions"] > 0
    assert swap["recomputed_tokens"] == 0 < recompute["recomputed_tokens"]


def test_never_fitting_requests_are_rejected_with_a_reason(teaching):
    reqs = [Request(0, 0.0, 10_000, 10), Request(1, 0.1, 100, 10)]
    res = _run(reqs, teaching, blocks=100)
    assert [s.state for s in res.seqs] == [REJECTED, DONE]
    assert "KV blocks" in res.seqs[0].reason


@pytest.mark.parametrize("policy", POLICIES)
def test_a_request_longer_than_max_model_len_is_rejected_not_served(teaching, policy):
    """vLLM refuses a request whose prompt plus max_tokens exceed max_model_len, at its API
    (HTTP 400 "This model's maximum context length is ..."; vLLM
    vllm/entrypoints/openai/serving_engine.py _validate_input @ 7ded96b3: `token_num +
    max_tokens > self.max_model_len`), so one token over is refused and exactly the limit is
    served, however much room the pool has (100,000 blocks here)."""
    reqs = [Request(0, 0.0, 4_000, 97), Request(1, 0.1, 4_000, 96), Request(2, 0.2, 100, 10)]
    res = _run(reqs, teaching, blocks=100_000, policy=policy, max_model_len=4_096)
    assert [s.state for s in res.seqs] == [REJECTED, DONE, DONE]
    assert res.seqs[0].reason == "longer than max_model_len 4,096 (prompt + output tokens)"
    assert res.seqs[0].first_token_s is None and res.seqs[0].release_s == 0.0
    summary = summarize(res)
    assert summary["rejected"] == 1 and summary["rejection_reasons"] == [res.seqs[0].reason]


def test_without_max_model_len_only_the_pool_limits(teaching):
    res = _run([Request(0, 0.0, 200_000, 10)], teaching, blocks=100_000)
    assert res.seqs[0].state == DONE


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_max_model_len_must_be_a_whole_number(value):
    with pytest.raises(SpecError, match="max_model_len"):
        SchedulerConfig(max_model_len=value)


def test_deterministic_for_a_seed(teaching, make_requests):
    def run(seed):
        return summarize(_run(make_requests(rate=8, n=200, seed=seed), teaching, blocks=600,
                              policy="chunked-prefill", max_num_batched_tokens=256))
    assert run(3) == run(3)
    assert run(3) != run(4)


@given(st.lists(st.tuples(st.floats(0, 1e3, allow_nan=False), st.integers(0, 5)),
                min_size=1, max_size=40))
def test_weighted_percentiles_are_nearest_rank_on_the_expanded_samples(pairs):
    expanded = sorted(v for v, w in pairs for _ in range(w))
    stats = weighted_quantiles(pairs)
    if not expanded:
        assert stats == {"p50": None, "p95": None, "p99": None, "mean": None}
        return
    for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        rank = max(1, math.ceil(round(q * len(expanded), 6)))
        assert stats[name] == expanded[rank - 1]
    assert stats["mean"] == pytest.approx(sum(expanded) / len(expanded))


def test_a_hand_traced_timeline():
    """Every iteration costs 1 ms (weights only). A (prompt 10, 3 tokens) arrives at 0; B
    (prompt 10, 2 tokens) at 1.5 ms: prefill A [0,1], decode A [1,2], decode A + prefill B
    [2,3] (A done, B's first token), decode B [3,4]."""
    coef = Coefficients(weights_bytes=10**9, kv_bytes_per_token=0, flops_per_token=0,
                        bandwidth_bytes_per_s=1e12, flops_per_s=1e15)
    res = _run([Request(0, 0.0, 10, 3), Request(1, 0.0015, 10, 2)], coef, 100)
    a, b = res.seqs
    assert a.token_times(res.decode_end_s) == pytest.approx([0.001, 0.002, 0.003])
    assert b.token_times(res.decode_end_s) == pytest.approx([0.003, 0.004])
    assert (b.admitted_s, a.release_s, b.release_s) == pytest.approx((0.002, 0.003, 0.004))
    summary = summarize(res)
    assert summary["ttft_ms"]["mean"] == pytest.approx(1.25)
    assert summary["queue_ms"]["p99"] == pytest.approx(0.5)
    assert summary["itl_ms"] == pytest.approx({"p50": 1.0, "p95": 1.0, "p99": 1.0,
                                               "mean": 1.0})
    assert summary["e2e_ms"]["mean"] == pytest.approx(2.75)
    assert res.num_iterations == 4


def test_priority_scheduling_serves_the_important_tenant_first(teaching, make_requests):
    tenants = [{"name": "interactive", "share": 0.2, "priority": 0},
               {"name": "batch", "share": 0.8, "priority": 1}]
    reqs = make_requests(rate=60, n=600, tenants=tenants)  # overload: the queue grows
    assert {r.tenant for r in reqs} == {"interactive", "batch"}

    def queue_ms(scheduling, tenant):
        res = _run(reqs, teaching, 3000, scheduling=scheduling, max_num_seqs=32)
        waits = [s.admitted_s - s.req.arrival_s for s in res.seqs if s.req.tenant == tenant]
        assert all(s.state == DONE for s in res.seqs)
        return 1000 * sum(waits) / len(waits)
    assert queue_ms("priority", "interactive") < 0.2 * queue_ms("priority", "batch")
    assert queue_ms("fcfs", "interactive") > 0.5 * queue_ms("fcfs", "batch")


def test_static_pads_and_waits_for_the_slowest(teaching):
    """A static group is priced at its longest prompt and released when its longest output
    ends: the short request's end-to-end time is the long one's."""
    reqs = [Request(0, 0.0, 100, 2), Request(1, 0.0, 3000, 60), Request(2, 0.0, 100, 2)]
    static = _run(reqs, teaching, policy="static", max_num_seqs=8)
    alone = _run([Request(0, 0.0, 100, 2)], teaching, policy="static", max_num_seqs=8)
    short, long_, _ = sorted(static.seqs, key=lambda s: s.req.request_id)
    assert short.release_s == long_.release_s
    assert short.first_token_s == long_.first_token_s
    assert short.first_token_s > 2 * alone.seqs[0].first_token_s  # padded to 3,000 tokens
    assert short.generated == 2 and long_.generated == 60


def test_goodput_counts_only_requests_meeting_every_slo(teaching, make_requests):
    from servecap.sim.metrics import SLO, tpot_s

    res = _run(make_requests(rate=20, n=300), teaching, blocks=600)
    done = [s for s in res.seqs if s.state == DONE]
    ttfts = sorted(s.first_token_s - s.req.arrival_s for s in done)
    tpots = sorted(tpot_s(s) for s in done)
    slo = SLO(ttft_s=ttfts[len(ttfts) // 2], itl_s=tpots[len(tpots) // 2])
    both = sum(1 for s in done if s.first_token_s - s.req.arrival_s <= slo.ttft_s
               and tpot_s(s) <= slo.itl_s)
    ttft_only = sum(1 for s in done if s.first_token_s - s.req.arrival_s <= slo.ttft_s)
    report = summarize(res, slo)
    assert 0 < both < ttft_only
    assert report["goodput_rps"] * report["duration_s"] == pytest.approx(both, rel=1e-5)
    assert report["slo_attainment"] == pytest.approx(both / len(res.seqs))
