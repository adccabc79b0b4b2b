"""by_prompt_bucket's one pass over the requests groups them exactly as the bucket-by-bucket
definition does (prompt length above the previous edge, at most this one, then above the
last), on any edges a workload may give (sorted, duplicates included) and any outcomes."""

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.sim.metrics import ms, quantiles
from servecap.sim.records import by_prompt_bucket
from servecap.sim.sampling import Request
from servecap.sim.state import DONE, REJECTED, Seq


def _reference(seqs, edges):
    done = [s for s in seqs if s.state == DONE]
    out, low = [], 0
    for high in (*edges, None):
        group = [s for s in done if s.req.prompt_tokens > low
                 and (high is None or s.req.prompt_tokens <= high)]
        out.append({"prompt_tokens_above": low, "prompt_tokens_max": high,
                    "completed": len(group),
                    "ttft_ms": ms(quantiles([s.first_token_s - s.req.arrival_s for s in group])),
                    "e2e_ms": ms(quantiles([s.release_s - s.req.arrival_s for s in group]))})
        low = high or low
    return out


request = st.tuples(st.integers(1, 5000), st.floats(0, 100), st.floats(0, 10), st.floats(0, 10),
                    st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(request, max_size=60), st.lists(st.integers(1, 5000), max_size=5), st.booleans())
def test_one_pass_groups_as_the_definition(rows, edges, ordered):
    seqs = []
    for i, (prompt, arrival, ttft, e2e, done) in enumerate(rows):
        seq = Seq(Request(i, arrival, prompt, 4))
        seq.state = DONE if done else REJECTED
        if done:
            seq.prefill_token_s.append(arrival + ttft)
            seq.release_s = arrival + ttft + e2e
        seqs.append(seq)
    edges = tuple(sorted(edges)) if ordered else tuple(edges)
    assert by_prompt_bucket(seqs, edges) == _reference(seqs, edges)
