"""The least-tokens router's outstanding tokens, kept by the engine as its requests change
(Engine.owed, Engine.j0_sum), equal the direct sum over every held request at every routing
decision, whatever the engine does meanwhile: every policy, preemption by recompute and swap,
prefix caching, priority, closed loops, multi-step, MoE, pipeline stages, hybrid state,
speculation, refusals, and a disaggregated deployment's handed-off requests."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from servecap.sim import cluster
from servecap.sim.deploy import Deployment, run_deployment

sys.path.insert(0, str(Path(__file__).parent / "golden"))
from cases import SLOS, cases  # noqa: E402

CASES = cases()
SINGLE = sorted(name for name, case in CASES.items() if case[4] == Deployment())


def direct(eng) -> int:
    """Prompt tokens to compute and output tokens to make, summed request by request."""
    routed = sum(s.target + s.req.output_tokens - s.generated
                 for s in eng.seqs[eng.next_arrival:])
    held = sum(s.target - s.computed + s.req.output_tokens - s.generated
               for group in (eng.waiting, eng.running.values()) for s in group)
    made = sum(eng.dec_idx - s.j0 for s in eng.decoding.values())
    return routed + held - made


def _checked(monkeypatch) -> list:
    seen = []
    kept = cluster.outstanding_tokens

    def check(eng):
        value = kept(eng)
        assert value == direct(eng)
        seen.append(value)
        return value
    monkeypatch.setattr(cluster, "outstanding_tokens", check)
    return seen


@pytest.mark.parametrize("name", SINGLE)
def test_kept_sums_equal_the_direct_sum(name, monkeypatch):
    """Each single-engine case run on three least-tokens replicas, the pool a third as
    large so each replica still queues and preempts."""
    reqs, coef, config, blocks, _, _ = CASES[name]
    seen = _checked(monkeypatch)
    outcome = run_deployment(reqs, coef, config, blocks // 3,
                             Deployment(replicas=3, router="least-tokens"), SLOS)[0]
    assert len(seen) >= 3 * len(reqs) - 3  # every arrival asked every replica
    assert any(seen) and len(set(seen)) > 10
    if name.endswith("-swap") or name == "continuous":
        assert any(s.preemptions for s in outcome.seqs)


def test_disaggregated_pools_too(monkeypatch):
    reqs, coef, config, blocks, _, _ = CASES["disaggregated"]
    seen = _checked(monkeypatch)
    run_deployment(reqs, coef, config, blocks, replace(
        Deployment(prefill_replicas=2, decode_replicas=2), router="least-tokens"), SLOS)
    assert len(seen) > 2 * len(reqs)
