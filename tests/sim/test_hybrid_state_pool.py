"""Hybrids in the simulator: each running request's fixed state comes out of the block pool."""

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.sim.config import POLICIES, SchedulerConfig
from servecap.sim.run import simulate
from servecap.sim.sampling import Request
from servecap.sim.state import DONE, REJECTED


def _burst(n: int, prompt: int = 30, output: int = 20) -> list[Request]:
    return [Request(request_id=i, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output)
            for i in range(n)]


def _peak_live(res) -> int:
    """Most requests holding blocks at once, from each one's admission and release."""
    events = sorted([(s.admitted_s, 1) for s in res.seqs if s.state == DONE]
                    + [(s.release_s, -1) for s in res.seqs if s.state == DONE])
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    return peak


def test_a_state_held_per_request_caps_how_many_run_at_once(teaching):
    blocks, state = 400, 30
    res = simulate(_burst(60), teaching, SchedulerConfig(state_blocks=state, watermark=0.0),
                   blocks)
    without = simulate(_burst(60), teaching, SchedulerConfig(watermark=0.0), blocks)
    assert all(s.state == DONE for s in res.seqs)
    # admitted with its prompt's blocks and its state; 400 // (2 + 30) = 12 at most
    assert 1 <= _peak_live(res) <= blocks // (math.ceil(30 / 16) + state) == 12
    assert _peak_live(without) == 60  # the KV alone fits every request at once
    assert res.unheld_blocks == blocks  # every state block came back
    assert res.end_s > without.end_s


def test_a_request_whose_state_and_kv_exceed_the_pool_is_rejected_naming_the_state(teaching):
    res = simulate(_burst(1, prompt=100, output=28), teaching,
                   SchedulerConfig(state_blocks=5, watermark=0.0), 10)
    assert res.seqs[0].state == REJECTED
    assert "needs 13 KV blocks (with its fixed state's 5)" in res.seqs[0].reason


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=st.sampled_from(POLICIES), state=st.integers(0, 40), blocks=st.integers(60, 400),
       seed=st.integers(0, 1000))
def test_conservation_with_states(teaching, make_requests, policy, state, blocks, seed):
    reqs = make_requests(rate=30, n=40, seed=seed, prompt={"kind": "uniform", "low": 8,
                                                           "high": 200},
                         output={"kind": "uniform", "low": 1, "high": 60})
    res = simulate(reqs, teaching, SchedulerConfig(policy=policy, state_blocks=state,
                                                   block_size_tokens=16, max_num_seqs=16,
                                                   max_num_batched_tokens=256), blocks)
    assert all(s.state in (DONE, REJECTED) for s in res.seqs)
    assert res.peak_used_blocks <= blocks
    if policy != "static":
        assert res.unheld_blocks == blocks


def _kv_pool(model: str) -> dict:
    out = CliRunner().invoke(app, ["simulate", model, "--device", "h100-80gb", "--rate", "50",
                                   "--input-len", "64", "--output-len", "64",
                                   "--num-requests", "40", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def test_simulate_charges_a_hybrid_its_state_in_blocks_and_a_plain_model_none():
    hybrid = _kv_pool("qwen3.6-35b-a3b")
    pool, coef = hybrid["kv_pool"], hybrid["coefficients"]
    block = pool["kv_bytes_per_token"] * pool["block_size_tokens"]
    assert pool["state_blocks_per_request"] == math.ceil(coef["state_bytes_per_request"] / block)
    assert pool["num_blocks"] == pool["pool_bytes"] // block  # no slots set aside up front
    assert _kv_pool("llama-3.1-8b")["kv_pool"]["state_blocks_per_request"] == 0
