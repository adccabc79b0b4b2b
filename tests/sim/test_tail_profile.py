"""records.tail reads the completed requests once in arrival order and sums the queue in the
order of latency through an index; the figures are those of sorting the requests themselves
by latency and averaging over them, to the bit."""

import pytest

from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment, run_once
from servecap.sim.records import tail
from servecap.sim.state import DONE


def _reference(seqs, share=0.01) -> dict:
    """tail() as defined: the completed requests sorted by end-to-end latency, the slowest
    share, and plain means over each."""
    done = sorted((s for s in seqs if s.state == DONE),
                  key=lambda s: s.release_s - s.req.arrival_s)
    if not done:
        return {}
    slow = done[-max(1, int(len(done) * share)):]

    def profile(part):
        n = len(part)
        return {
            "mean_queue_ms": round(sum(s.admitted_s - s.req.arrival_s for s in part) / n
                                   * 1000, 3),
            "mean_prefill_chunks": round(sum(s.chunks for s in part) / n, 3),
            "mean_preemptions": round(sum(s.preemptions for s in part) / n, 3),
            "mean_prompt_tokens": round(sum(s.req.prompt_tokens for s in part) / n, 1),
            "mean_output_tokens": round(sum(s.req.output_tokens for s in part) / n, 1),
        }
    return {"share": share, "num_requests": len(slow), "tail": profile(slow),
            "all": profile(done)}


@pytest.mark.parametrize("policy, blocks, share", [
    ("continuous", 3_000, 0.01), ("chunked-prefill", 3_000, 0.1),
    ("continuous", 400, 0.05)])  # a small pool: preemptions and rejections
def test_tail_is_the_sorted_definition(teaching, make_requests, policy, blocks, share):
    run = run_once(make_requests(rate=40, n=600), teaching,
                   SchedulerConfig(policy=policy, max_num_seqs=32,
                                   max_num_batched_tokens=1024), blocks, Deployment(1))
    assert any(s.state == DONE for s in run.seqs)
    assert tail(run.seqs, share) == _reference(run.seqs, share)


def test_tail_of_nothing_completed_is_empty():
    assert tail([]) == {}
