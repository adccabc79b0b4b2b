"""Prefix-cache reuse under vLLM's block geometry: full blocks only, chained, the last token
recomputed, LRU eviction in a pool of a given size."""

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.prefix_cache import Prompt, lru_hits, reuse

FIXTURE = Path(__file__).parents[1] / "fixtures" / "prefix" / "vllm_issue_40696.json"
LAWS = Path(__file__).parents[1] / "fixtures" / "prefix" / "vllm_hit_laws.json"


def _ids(start: int, n: int) -> tuple[int, ...]:
    return tuple(range(start, start + n))


def test_published_hits_at_a_528_token_block():
    """vLLM issue 40696: a repeated prompt of 552 tokens gets 1 block (528) cached, ~95 %;
    979 tokens also 528, ~54 %; under one block, 0."""
    fixture = json.loads(FIXTURE.read_text())
    bs = fixture["block_size"]
    for row in fixture["rows"]:
        n = row["prompt_tokens"]
        prompts = [Prompt(_ids(0, n - 1) + (1,)), Prompt(_ids(0, n - 1) + (2,))]
        found = reuse(prompts, bs, pool_blocks=10)
        assert found.per_request_cached == (0, row["cached_tokens"])
        assert round(100 * row["cached_tokens"] / n) in (row["stated_hit_pct"],
                                                         row["stated_hit_pct"] + 1)


def test_published_replay_hits_at_544_and_576_token_blocks():
    """vLLM PR 57467: a 3274-token prompt replayed reuses 3264 tokens at a 544-token block,
    2880 at 576."""
    for row in json.loads(LAWS.read_text())["replay"]:
        n = row["prompt_tokens"]
        found = reuse([Prompt(_ids(0, n)), Prompt(_ids(0, n))], row["block_size"])
        assert found.per_request_cached == (0, row["cached_tokens"])


def test_published_hits_of_eight_requests_behind_one_shared_prefix():
    """vLLM issue 53749: 8 requests sharing P tokens hit (N-1) x floor(P/B) x B; 908 tokens
    under a 1056-token block, 0; 1308, 7 blocks of 1056."""
    for row in json.loads(LAWS.read_text())["shared_prefix"]:
        shared = _ids(0, row["shared_tokens"])
        prompts = [Prompt(shared + _ids(10_000 * (i + 1), 300)) for i in range(row["requests"])]
        found = reuse(prompts, row["block_size"], pool_blocks=64)
        assert found.cached_tokens == row["hit_tokens"] == found.reusable_tokens
        assert bool(found.short_prefixes) == (row["hit_tokens"] == 0)


def test_the_last_token_is_recomputed_so_an_exact_repeat_of_k_blocks_hits_k_minus_1():
    found = reuse([Prompt(_ids(0, 64)), Prompt(_ids(0, 64))], 16)
    assert found.per_request_cached == (0, 48)
    assert found.blocks_shared == 4  # the pool stores the four blocks once


def test_a_block_after_a_differing_one_is_not_reused():
    """Chained hashes: block 2 equal but block 1 different means nothing is reused."""
    a = _ids(0, 16) + _ids(100, 16) + (7,)
    b = _ids(50, 16) + _ids(100, 16) + (8,)
    assert reuse([Prompt(a), Prompt(b)], 16).reusable_tokens == 0


def test_a_cache_salt_separates_identical_prompts():
    p = _ids(0, 40)
    assert reuse([Prompt(p, "a"), Prompt(p, "b")], 16).reusable_tokens == 0
    assert reuse([Prompt(p, "a"), Prompt(p, "a")], 16).reusable_tokens == 32


def test_a_small_pool_evicts_the_least_recently_used_prefix():
    sys_a, sys_b = _ids(0, 32), _ids(1000, 32)
    order = [sys_a + (1,), sys_b + (2,), sys_a + (3,)]
    chains = reuse([Prompt(p) for p in order], 16).per_request_reusable
    assert chains == (0, 0, 32)  # unbounded: the third request finds sys_a
    # 3 usable blocks: each request holds 3 (2 full + 1 partial), so sys_b evicts sys_a
    small = reuse([Prompt(p) for p in order], 16, pool_blocks=3)
    assert small.per_request_cached == (0, 0, 0) and small.hit_rate == 0
    roomy = reuse([Prompt(p) for p in order], 16, pool_blocks=5)
    assert roomy.per_request_cached == (0, 0, 32)


def test_a_prompt_larger_than_the_pool_is_not_served():
    found = reuse([Prompt(_ids(0, 100)), Prompt(_ids(0, 20))], 16, pool_blocks=4)
    assert found.per_request_cached == (None, 0)
    assert found.requests_served == 1 and found.prompt_tokens == 20


def test_a_shared_prefix_under_one_block_is_warned_of():
    prompts = [Prompt(_ids(0, 10) + _ids(100 * i, 30)) for i in range(1, 6)]
    found = reuse(prompts, 16)
    assert found.hit_rate == 0
    assert [(s.prefix_tokens, s.requests) for s in found.short_prefixes] == [(10, 5)]


def test_groups_take_each_request_at_its_deepest_shared_block():
    sys_p, doc = _ids(0, 48), _ids(500, 32)
    prompts = [Prompt(sys_p + doc + (i,)) for i in range(3)] + \
        [Prompt(sys_p + (900 + i,)) for i in range(2)]
    found = reuse(prompts, 16)
    assert [(g.prefix_tokens, g.requests) for g in found.groups] == [(80, 3), (48, 2)]
    assert found.per_request_group == (0, 0, 0, 1, 1)
    assert found.reusable_tokens == 80 * 2 + 48 * 2
    assert sum(g.reusable_tokens for g in found.groups) == found.reusable_tokens


# properties -------------------------------------------------------------------------------
TOKENS = st.lists(st.integers(0, 3), min_size=1, max_size=40)  # few ids: many shared prefixes
TRACES = st.lists(TOKENS, min_size=1, max_size=12)


def _fitting_pool(trace: list, bs: int, extra: int) -> int:
    """A pool every request fits (vLLM refuses to start with a pool that cannot hold
    max_model_len): the largest request's blocks plus extra. Below that, a larger pool
    serves a request a smaller one refuses, whose blocks can evict a later hit."""
    return max(-(-len(t) // bs) for t in trace) + extra


@settings(max_examples=300, deadline=None)
@given(TRACES, st.integers(1, 8), st.integers(0, 30), st.integers(0, 30))
def test_hit_rate_is_a_fraction_and_never_falls_as_the_pool_grows(trace, bs, extra, more):
    prompts = [Prompt(tuple(t)) for t in trace]
    pool = _fitting_pool(trace, bs, extra)
    small, large = reuse(prompts, bs, pool), reuse(prompts, bs, pool + more)
    unbounded = reuse(prompts, bs)
    for found in (small, large, unbounded):
        assert 0 <= found.hit_rate <= 1 and 0 <= found.hit_rate_unbounded <= 1
    assert small.cached_tokens <= large.cached_tokens <= unbounded.cached_tokens
    assert small.hit_rate <= large.hit_rate <= unbounded.hit_rate


@settings(max_examples=300, deadline=None)
@given(TRACES, st.integers(1, 8), st.integers(0, 30))
def test_per_request_hits_never_fall_as_the_pool_grows(trace, bs, extra):
    prompts = [Prompt(tuple(t)) for t in trace]
    pool = _fitting_pool(trace, bs, extra)
    small, large = reuse(prompts, bs, pool), reuse(prompts, bs, pool + 1)
    for a, b in zip(small.per_request_cached, large.per_request_cached, strict=True):
        assert a <= b


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 64), st.integers(0, 63), st.lists(st.integers(10, 99), min_size=2,
                                                         max_size=8, unique=True))
def test_zero_when_every_shared_prefix_is_under_one_block(bs, shared, tails):
    """Prompts that share only `shared` < block_size tokens, then differ: nothing reused."""
    shared = shared % bs
    prompts = [Prompt(_ids(0, shared) + (t,) * (bs * 3)) for t in tails]
    found = reuse(prompts, bs, pool_blocks=1000)
    assert found.hit_rate == 0 == found.hit_rate_unbounded == found.blocks_shared
    assert all(s.prefix_tokens < bs for s in found.short_prefixes)
    if shared:
        assert found.short_prefixes[0].prefix_tokens == shared


def test_a_refused_request_can_leave_a_smaller_pool_a_hit_the_larger_one_evicts():
    """Why the properties above keep every request within the pool: at 5 blocks the
    6-block request is refused and the cached block survives; at 6 it runs and evicts it."""
    chains, lengths = [[0], [1, 2, 3, 4, 5, 6], [0, 7]], [1, 6, 2]
    assert lru_hits(chains, lengths, 1, 5) == [0, None, 1]
    assert lru_hits(chains, lengths, 1, 6) == [0, 0, 0]
