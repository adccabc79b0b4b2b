"""The host tier a target prefix hit rate needs, from a trace or workload: the LRU stack
distance (in tokens) of every prefix reuse, as sim/kvpool.py's HostTier keeps its entries.

The tier stores each prompt's full blocks as it is computed: its shared prefix under its group,
the rest under the request (which no later request reads). A reuse of a group hits a tier of C
tokens when the group's own tokens plus those of every entry stored or touched since its last
use fit in C (least recently used evicted first, whole entries). Requests are taken in arrival
order, the order their prompts are computed in when nothing queues; a group's first use is a
miss whatever the size. The GPU's own prefix cache can only add hits to these (the simulator
counts both)."""

from dataclasses import dataclass

from .sampling import Request


@dataclass(frozen=True)
class Reuse:
    offered_tokens: int  # full-block prefix tokens over every request with a group
    # (tokens served, LRU distance in tokens) of every reuse of a group already stored
    reuses: tuple[tuple[int, int], ...]

    @property
    def best_rate(self) -> float:
        """The hit rate of an unbounded tier: every reuse served, first uses missed."""
        return sum(t for t, _ in self.reuses) / self.offered_tokens if self.offered_tokens \
            else 0.0

    def rate_at(self, tokens: int) -> float:
        """The share of offered prefix tokens a tier of `tokens` serves."""
        served = sum(t for t, d in self.reuses if d <= tokens)
        return served / self.offered_tokens if self.offered_tokens else 0.0

    def tokens_for(self, rate: float) -> int | None:
        """The fewest tokens whose tier serves at least `rate` (None: past best_rate)."""
        if self.offered_tokens == 0 or rate > self.best_rate + 1e-12:
            return None
        need, served = rate * self.offered_tokens, 0
        if need <= 0:
            return 0
        for tokens, distance in sorted(self.reuses, key=lambda r: r[1]):
            served += tokens
            if served >= need - 1e-9:
                return distance
        return None


def reuse_distances(requests: list[Request], block_size: int) -> Reuse:
    """Each reuse's LRU distance in O(n log n): a Fenwick tree over access order holds each
    entry's tokens at its latest access."""
    order = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
    tree = [0] * (2 * len(order) + 2)
    last: dict[str, tuple[int, int]] = {}
    reuses, offered, now = [], 0, 0

    def add(i: int, value: int) -> None:
        i += 1
        while i < len(tree):
            tree[i] += value
            i += i & -i

    def total(i: int) -> int:  # Σ over positions < i
        out = 0
        while i > 0:
            out += tree[i]
            i -= i & -i
        return out

    for req in order:
        full = req.prompt_tokens // block_size * block_size
        shared = min(req.prefix_tokens // block_size * block_size, full) \
            if req.prefix_group else 0
        if shared:
            offered += shared
            if req.prefix_group in last:
                at, size = last[req.prefix_group]
                reuses.append((shared, total(now) - total(at + 1) + size))
                add(at, -size)
            add(now, shared)
            last[req.prefix_group] = (now, shared)
            now += 1
        if full - shared > 0:
            add(now, full - shared)
            now += 1
    return Reuse(offered, tuple(reuses))
