"""Replicas behind a router, and disaggregated prefill/decode pools."""

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.errors import SpecError
from servecap.sim.cluster import (
    disaggregated_summary,
    simulate_disaggregated,
    simulate_replicas,
)
from servecap.sim.config import SchedulerConfig
from servecap.sim.metrics import SLO, summarize
from servecap.sim.run import simulate
from servecap.sim.sampling import Request
from servecap.sim.state import DONE, REJECTED

CFG = SchedulerConfig(policy="continuous")


def _long_and_short(make_requests, rate=6, n=400):
    return make_requests(rate=rate, n=n, prompt={"kind": "empirical", "values": [64, 6000],
                                                 "weights": [0.8, 0.2]},
                         output={"kind": "uniform", "low": 20, "high": 300})


def test_one_replica_is_the_plain_simulation(teaching, make_requests):
    reqs = make_requests(rate=8, n=200)
    alone = summarize(simulate(reqs, teaching, CFG, 2000))
    routed = summarize(simulate_replicas(reqs, teaching, CFG, 2000, 1, "least-tokens"))
    assert routed == alone


@pytest.mark.parametrize("router", ["round-robin", "least-requests", "least-tokens"])
def test_replicas_serve_every_request(teaching, make_requests, router):
    reqs = _long_and_short(make_requests)
    results = simulate_replicas(reqs, teaching, CFG, 2000, 3, router)
    assert sum(len(r.seqs) for r in results) == len(reqs)
    assert all(s.state == DONE and s.generated == s.req.output_tokens
               for r in results for s in r.seqs)
    assert min(len(r.seqs) for r in results) > 50


def test_token_aware_router_spreads_long_prompts(teaching):
    """Seed 000: a router that counts requests (round-robin here) can overload one replica
    with long prompts; here every other request is long, so round-robin sends all of them
    to the same replica."""
    rng, now, reqs = random.Random(3), 0.0, []
    for i in range(600):
        now += rng.expovariate(16)
        reqs.append(Request(i, now, 6000 if i % 2 == 0 else 64, rng.randint(20, 300)))

    def run(router):
        return summarize(simulate_replicas(reqs, teaching, CFG, 4000, 2, router))
    tokens, count = run("least-tokens"), run("round-robin")
    assert tokens["ttft_ms"]["p99"] < 0.5 * count["ttft_ms"]["p99"]
    assert tokens["e2e_ms"]["mean"] < 0.5 * count["e2e_ms"]["mean"]


def test_two_replicas_raise_throughput(teaching, make_requests):
    reqs = make_requests(rate=400, n=400)
    one = summarize(simulate(reqs, teaching, CFG, 2000))
    two = summarize(simulate_replicas(reqs, teaching, CFG, 2000, 2, "least-tokens"))
    assert two["output_tokens_per_s"] > 1.3 * one["output_tokens_per_s"]


def test_disaggregation_conserves_and_isolates_decode(teaching, make_requests):
    reqs = _long_and_short(make_requests)
    _, final, decode = simulate_disaggregated(reqs, teaching, CFG, 4000, 1, 1, 50e9,
                                              "round-robin")
    assert len(final) == len(reqs)
    for seq in final:
        assert seq.state == DONE
        assert len(seq.token_times(decode[0].decode_end_s)) == seq.req.output_tokens
    disagg = disaggregated_summary(final, decode, "continuous", SLO())
    colocated = summarize(simulate_replicas(reqs, teaching, CFG, 4000, 2, "round-robin"))
    assert disagg["completed"] == colocated["completed"] == len(reqs)
    assert disagg["tpot_ms"]["p99"] < colocated["tpot_ms"]["p99"]


@pytest.mark.parametrize("pools", ["disaggregated", "replicas"])
def test_a_request_longer_than_max_model_len_is_never_served(teaching, pools):
    """The limit is on the request as offered, prompt + output (vLLM's API check), so a
    disaggregated prefill pool, which computes each prompt and one token only, still refuses
    a 4,090 + 10 request at max_model_len 4,096 before its prompt is computed."""
    reqs = [Request(0, 0.0, 4_090, 10), Request(1, 0.0, 4_000, 96), Request(2, 0.1, 50, 10)]
    config = replace(CFG, max_model_len=4_096)
    if pools == "disaggregated":
        prefill, final, _ = simulate_disaggregated(reqs, teaching, config, 4000, 1, 1, 50e9,
                                                   "round-robin")
        assert all(s.req.request_id != 0 for r in prefill for s in r.seqs)
    else:
        final = sorted((s for r in simulate_replicas(reqs, teaching, config, 4000, 2,
                                                     "round-robin") for s in r.seqs),
                       key=lambda s: s.req.request_id)
    assert [s.state for s in final] == [REJECTED, DONE, DONE]
    assert final[0].reason == "longer than max_model_len 4,096 (prompt + output tokens)"
    assert final[0].first_token_s is None


def test_a_slower_kv_link_delays_the_second_token(teaching, make_requests):
    reqs = _long_and_short(make_requests, n=200)

    def second_token_gap_s(link_bytes_per_s):
        _, final, decode = simulate_disaggregated(reqs, teaching, CFG, 4000, 1, 1,
                                                  link_bytes_per_s, "round-robin")
        longest = max(final, key=lambda s: s.req.prompt_tokens)
        times = longest.token_times(decode[0].decode_end_s)
        return times[1] - times[0]
    transfer_s = 6000 * teaching.kv_bytes_per_token / 1e9
    assert second_token_gap_s(1e9) >= transfer_s > 10 * second_token_gap_s(100e9)


def test_unknown_router(teaching, make_requests):
    with pytest.raises(SpecError, match="router"):
        simulate_replicas(make_requests(n=5), teaching, CFG, 100, 2, "random")


def test_all_at_once_arrivals_still_spread(teaching, make_requests):
    """Requests routed in the same instant count as outstanding before any replica runs."""
    reqs = [r.__class__(r.request_id, 0.0, r.prompt_tokens, r.output_tokens)
            for r in make_requests(n=90)]
    for router in ("least-requests", "least-tokens"):
        results = simulate_replicas(reqs, teaching, CFG, 4000, 3, router)
        assert min(len(r.seqs) for r in results) >= 20


def test_static_has_no_decode_pool(teaching, make_requests):
    with pytest.raises(SpecError, match="iteration-level"):
        simulate_disaggregated(make_requests(n=5), teaching, SchedulerConfig(policy="static"),
                               1000, 1, 1, 50e9, "round-robin")


@settings(max_examples=25, deadline=None)
@given(policy=st.sampled_from(["continuous", "prefill-priority", "decode-priority",
                               "chunked-prefill"]),
       router=st.sampled_from(["round-robin", "least-requests", "least-tokens"]),
       pools=st.tuples(st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 999),
       swap=st.booleans())
def test_disaggregated_conservation(teaching, make_requests, policy, router, pools, seed,
                                    swap):
    reqs = make_requests(rate=30, n=50, seed=seed)
    cfg = SchedulerConfig(policy=policy, max_num_batched_tokens=512, max_num_seqs=8,
                          preemption_mode="swap" if swap else "recompute")
    _, final, decode = simulate_disaggregated(reqs, teaching, cfg, 300, *pools, 20e9, router)
    timeline = {id(s): r.decode_end_s for r in decode for s in r.seqs}
    assert sorted(s.req.request_id for s in final) == list(range(50))
    for seq in final:
        if seq.state == DONE:
            times = seq.token_times(timeline.get(id(seq), []))
            assert len(times) == seq.req.output_tokens and times == sorted(times)
        else:
            assert seq.reason
