"""`servecap fit --find kv-offload`: the host tier a target prefix hit rate needs on a
workload, from LRU stack distances (sim/offload_fit.py) sized by plan's ledger; simulate at
the answer reaches the rate; the stack distances agree with the simulator's own tier."""

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from servecap.sim.kvpool import HostTier
from servecap.sim.offload_fit import reuse_distances
from servecap.sim.sampling import Request

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "kv_offload" / "agents.yaml"
FIT = ("fit", "llama-3.1-8b", "--device", "l4-24gb", "--engine", "vllm", "--context", "8192",
       "--find", "kv-offload", "--workload", str(AGENTS))


def test_the_answer_reaches_the_rate_and_a_hundredth_less_does_not(run):
    result = run(*FIT, "--hit-rate", "0.9", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["fits"] and out["tier_hit_rate"] >= 0.9 and out["best_hit_rate"] == 0.95
    smaller = run("plan", "llama-3.1-8b", "--device", "l4-24gb", "--engine", "vllm",
                  "--context", "8192", "--kv-offloading-size",
                  str(round(out["kv_offloading_size_gib"] - 0.01, 2)), "--json")
    tokens = json.loads(smaller.stdout)["kv_offload"]["tokens"]
    assert tokens < out["tokens"]
    sim = run("simulate", "llama-3.1-8b", "--device", "l4-24gb", "--engine", "vllm",
              "--context", "8192", "--workload", str(AGENTS), "--kv-offloading-size",
              str(out["kv_offloading_size_gib"]), "--json")
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.stdout)["policies"][0]["prefix_hit_rate"] >= 0.9


def test_a_rate_past_the_reuses_is_exit_1(run):
    result = run(*FIT, "--hit-rate", "0.99", "--json")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert not out["fits"] and out["kv_offloading_size_gib"] is None


def test_bad_input_is_one_line(run):
    for extra, needle in ((("--hit-rate", "1.5"), "--hit-rate"), ((), "--hit-rate")):
        result = run(*FIT, *extra)
        assert result.exit_code == 2 and "\n" not in result.stderr.strip(), result.output
        assert needle in result.stderr
    result = run("fit", "llama-3.1-8b", "--device", "l4-24gb", "--context", "8192",
                 "--hit-rate", "0.9")
    assert result.exit_code == 2 and "--find kv-offload" in result.stderr


@given(st.lists(st.tuples(st.integers(-1, 6), st.integers(0, 300)), min_size=1, max_size=60),
       st.lists(st.integers(1, 400), min_size=7, max_size=7), st.integers(16, 3000))
def test_stack_distances_replay_the_simulators_tier(draws, sizes, capacity):
    """rate_at(C) is what HostTier (the simulator's tier) serves, request by request (each
    group's prefix one length, as a workload's prefix_groups give it; -1: no group)."""
    reqs = [Request(i, float(i), prompt + (sizes[g] if g >= 0 else 0), 8,
                    f"g{g}" if g >= 0 else None, sizes[g] if g >= 0 else 0)
            for i, (g, prompt) in enumerate(draws)]
    tier, served, bsz = HostTier(capacity), 0, 16
    for req in reqs:
        full = req.prompt_tokens // bsz * bsz
        shared = min(req.prefix_tokens // bsz * bsz, full) if req.prefix_group else 0
        if shared and tier.holds(req.prefix_group):
            served += shared
        if shared:
            tier.store(("group", req.prefix_group), shared)
        tier.store(("request", req.request_id), full - shared)
    reuse = reuse_distances(reqs, bsz)
    assert reuse.rate_at(capacity) * reuse.offered_tokens == served or (
        abs(reuse.rate_at(capacity) * reuse.offered_tokens - served) < 1e-6)
