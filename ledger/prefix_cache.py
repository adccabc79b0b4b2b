"""Prefix-cache reuse of a request sequence under vLLM's block geometry: which prompt tokens a
later request finds cached, with an LRU pool of a given size and with an unbounded one.

vLLM (v1) caches only FULL blocks. Each full block is named by a chained hash of (parent
block's hash, the block's token ids, extra keys such as cache_salt), so a block is reusable
only when every block before it matches too, and a shared prefix shorter than one block is
never reused (vllm/v1/core/kv_cache_utils.py: hash_block_tokens, get_request_block_hasher, at
v0.33.0). A request's hit is the longest run of cached blocks from its start, capped at
prompt_tokens - 1 so the last token is recomputed for its logits: a fully cached prompt of
exactly k blocks hits k - 1 (vllm/v1/core/kv_cache_manager.py: get_computed_blocks). vLLM
counts the hit rate as hit tokens over queried (prompt) tokens (vllm/v1/metrics/stats.py:
PrefixCacheStats).

The chained hash is replaced here by exact interning: a block is the pair (parent block's id,
its tokens), numbered on first sight, so two blocks share an id exactly when vLLM's chained
hashes would match (without hash collisions). Stdlib only; no I/O.

The pool is replayed one request at a time (the trace's order): a request holds
ceil(prompt / block_size) blocks while it runs; its new blocks come from uncached free blocks
first, then by evicting the least recently freed cached block (vLLM's free queue: uncached
blocks are prepended, cached ones appended, a request's blocks freed last block first:
vllm/v1/core/block_pool.py free_blocks, single_type_kv_cache_manager.py free). Concurrent
requests, which pin more blocks at once, and output tokens' blocks are not modelled: the
figure is the reuse the trace's prompts allow at this pool size, an upper bound on a busy
server's. A block cached again while a copy of its chain position is still cached is counted
once (vLLM may briefly hold both copies)."""

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .errors import SpecError

ROOT = -1  # the parent id of a request's first block (no cache_salt)


@dataclass(frozen=True)
class Prompt:
    """One request's prompt token ids (a tuple, or an array('q') to hold a large trace in
    8 bytes a token) and its cache_salt ('' when none: vLLM adds the salt to the first
    block's extra keys, so differently salted prompts share nothing)."""

    tokens: Sequence[int]
    salt: str = ""


@dataclass
class Interner:
    """Block ids: (parent id, the block's tokens) -> a number, the chained hash made exact."""

    ids: dict = field(default_factory=dict)

    def chain(self, prompt: Prompt, block_size: int) -> list[int]:
        """The ids of the prompt's full blocks, first to last."""
        parent: object = ROOT if not prompt.salt else ("salt", prompt.salt)
        out = []
        tokens = prompt.tokens
        for start in range(0, len(tokens) - block_size + 1, block_size):
            key = (parent, tuple(tokens[start:start + block_size]))
            parent = self.ids.setdefault(key, len(self.ids))
            out.append(parent)
        return out


def max_hit_blocks(prompt_tokens: int, block_size: int) -> int:
    """The most full blocks vLLM reuses for a prompt: the hit is capped at prompt_tokens - 1
    tokens (the last token is recomputed), then rounded down to whole blocks."""
    return max(prompt_tokens - 1, 0) // block_size


def blocks_held(prompt_tokens: int, block_size: int) -> int:
    """Blocks a prompt holds while it runs: its full blocks and a partial last one."""
    return -(-prompt_tokens // block_size)


def unbounded_hits(chains: list[list[int]], lengths: list[int], block_size: int) -> list[int]:
    """Per request, the blocks it finds cached when every block ever computed stays cached."""
    seen: set[int] = set()
    hits = []
    for chain, length in zip(chains, lengths, strict=True):
        cap = max_hit_blocks(length, block_size)
        hit = 0
        while hit < cap and chain[hit] in seen:
            hit += 1
        hits.append(hit)
        seen.update(chain)
    return hits


def lru_hits(chains: list[list[int]], lengths: list[int], block_size: int,
             pool_blocks: int) -> list[int | None]:
    """Per request, the blocks it finds cached in a pool of pool_blocks usable blocks
    replayed in order; None for a request whose prompt needs more blocks than the pool
    (vLLM never schedules it)."""
    if pool_blocks < 1:
        raise SpecError("pool_blocks", pool_blocks, "a whole number >= 1")
    cached: OrderedDict[int, None] = OrderedDict()  # least recently freed first
    hits: list[int | None] = []
    for chain, length in zip(chains, lengths, strict=True):
        held = blocks_held(length, block_size)
        if held > pool_blocks:
            hits.append(None)
            continue
        cap = max_hit_blocks(length, block_size)
        hit = 0
        while hit < cap and chain[hit] in cached:
            hit += 1
        for block in chain[:hit]:  # referenced: no longer evictable while the request runs
            del cached[block]
        for block in chain[hit:]:  # recomputed: a copy still cached is the same block
            cached.pop(block, None)
        while len(cached) > pool_blocks - held:
            cached.popitem(last=False)
        for block in reversed(chain):  # freed last block first: the prefix is evicted last
            cached[block] = None
        hits.append(hit)
    return hits


@dataclass(frozen=True)
class Group:
    """Requests whose deepest full block shared with another request is the same block:
    prefix_tokens of shared prefix, and the hit tokens its requests got."""

    block: int
    prefix_tokens: int
    requests: int
    reusable_tokens: int
    cached_tokens: int
    first: int  # the index of its first request, for showing the prefix


@dataclass(frozen=True)
class ShortPrefix:
    """Requests that share a token prefix with another request but no full block: the
    prefix (prefix_tokens < block_size) gives them 0 reuse."""

    prefix_tokens: int
    requests: int
    first: int


@dataclass(frozen=True)
class Reuse:
    """The ledger of a trace's prefix reuse. Tokens are prompt tokens of the requests the
    pool could hold (served); hit_rate is vLLM's figure, cached / prompt tokens."""

    block_size: int
    pool_blocks: int | None
    requests: int
    requests_served: int
    prompt_tokens: int
    cached_tokens: int
    reusable_tokens: int
    blocks_total: int
    blocks_distinct: int
    groups: tuple[Group, ...]
    short_prefixes: tuple[ShortPrefix, ...]
    per_request_cached: tuple[int | None, ...]
    per_request_reusable: tuple[int, ...]
    per_request_group: tuple[int | None, ...]  # index into groups, None: shares no block
    prompt_tokens_all: int  # every request's, served or not

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def hit_rate_unbounded(self) -> float:
        """Every request counted: the unbounded pool serves them all."""
        total = self.prompt_tokens_all
        return self.reusable_tokens / total if total else 0.0

    @property
    def blocks_shared(self) -> int:
        """Full blocks that would be stored again if every request kept its own copy."""
        return self.blocks_total - self.blocks_distinct

    @property
    def pool_tokens_saved(self) -> int:
        """KV token slots the shared blocks take once instead of once per request."""
        return self.blocks_shared * self.block_size


def check_block_size(block_size: int) -> int:
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise SpecError("--block-size", block_size, "a whole number of tokens >= 1")
    return block_size


def reuse(prompts: list[Prompt], block_size: int, pool_blocks: int | None = None) -> Reuse:
    """The reuse of prompts (in arrival order) at block_size with an LRU pool of
    pool_blocks usable blocks (None: unbounded; the LRU figures are then the unbounded
    ones)."""
    check_block_size(block_size)
    interner = Interner()
    chains = [interner.chain(p, block_size) for p in prompts]
    lengths = [len(p.tokens) for p in prompts]
    free = unbounded_hits(chains, lengths, block_size)
    lru = free if pool_blocks is None else lru_hits(chains, lengths, block_size, pool_blocks)
    served = [n for n, h in zip(lengths, lru, strict=True) if h is not None]
    groups, membership = _groups(chains, free, lru, block_size)
    return Reuse(
        block_size=block_size, pool_blocks=pool_blocks, requests=len(prompts),
        requests_served=len(served), prompt_tokens=sum(served),
        cached_tokens=sum(h for h in lru if h) * block_size,
        reusable_tokens=sum(free) * block_size,
        blocks_total=sum(len(c) for c in chains), blocks_distinct=len(interner.ids),
        groups=groups, short_prefixes=_short_prefixes(prompts, chains, block_size),
        per_request_cached=tuple(None if h is None else h * block_size for h in lru),
        per_request_reusable=tuple(h * block_size for h in free),
        per_request_group=membership, prompt_tokens_all=sum(lengths))


def _groups(chains: list[list[int]], free: list[int], lru: list[int | None],
            block_size: int) -> tuple[tuple[Group, ...], tuple[int | None, ...]]:
    """Each request joins the group of its deepest full block that another request also
    has; groups are listed by the tokens they let be reused, most first."""
    count: dict[int, int] = {}
    for chain in chains:
        for block in chain:
            count[block] = count.get(block, 0) + 1
    deepest: list[tuple[int, int] | None] = []
    for chain in chains:
        depth = 0
        while depth < len(chain) and count[chain[depth]] > 1:
            depth += 1
        deepest.append((chain[depth - 1], depth) if depth else None)
    tally: dict[int, list[int]] = {}  # block -> [depth, requests, reusable, cached, first]
    for i, key in enumerate(deepest):
        if key is None:
            continue
        row = tally.setdefault(key[0], [key[1], 0, 0, 0, i])
        row[1] += 1
        row[2] += free[i] * block_size
        row[3] += (lru[i] or 0) * block_size
    order = sorted(tally, key=lambda b: (-tally[b][2], -tally[b][1], tally[b][4]))
    groups = tuple(Group(b, tally[b][0] * block_size, tally[b][1], tally[b][2], tally[b][3],
                         tally[b][4]) for b in order)
    index = {g.block: n for n, g in enumerate(groups)}
    return groups, tuple(None if key is None else index[key[0]] for key in deepest)


def _short_prefixes(prompts: list[Prompt], chains: list[list[int]],
                    block_size: int) -> tuple[ShortPrefix, ...]:
    """Token prefixes shared by requests that share no full block: the longest prefix each
    such request has in common with any other request of the same salt, grouped; the
    requests counted are all those starting with it. Such a prefix is under one block (a
    longer one would share the first block), so only each prompt's first block_size tokens
    are compared: with its neighbours in sorted order."""
    keyed = sorted((p.salt, tuple(p.tokens[:block_size]), i) for i, p in enumerate(prompts))
    heads = [(salt, head) for salt, head, _ in keyed]
    firsts: dict[int, int] = {}
    for chain in chains:
        if chain:
            firsts[chain[0]] = firsts.get(chain[0], 0) + 1
    found: dict[tuple, int] = {}
    for pos, (salt, head, i) in enumerate(keyed):
        if chains[i] and firsts[chains[i][0]] > 1:
            continue
        best = 0
        for other in (pos - 1, pos + 1):
            if 0 <= other < len(keyed) and keyed[other][0] == salt:
                best = max(best, _common(head, keyed[other][1]))
        best = min(best, block_size - 1)
        if best:
            key = (salt, head[:best])
            found[key] = min(found.get(key, i), i)
    out = []
    for (salt, prefix), first in found.items():
        lo = bisect_left(heads, (salt, prefix))
        hi = lo
        while hi < len(heads) and heads[hi][0] == salt and heads[hi][1][:len(prefix)] == prefix:
            hi += 1
        out.append(ShortPrefix(len(prefix), hi - lo, first))
    out.sort(key=lambda s: (-s.requests, -s.prefix_tokens, s.first))
    return tuple(out)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
