"""The paged KV block pool the scheduler admits against, sized by the ledger's plan."""

from collections import OrderedDict

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Plan
from servecap.ledger.verification import kv_pool_blocks

from .speculative import draft_fixed_bytes


def pool_blocks(plan: Plan, block_size_tokens: int, draft: Plan | None = None) -> int:
    """Blocks the device holds after the ledger's fixed lines: (device - weights - metadata -
    runtime peak - safety) // (kv_bytes_per_token x block_size_tokens). Full-attention layers
    assumed: a sliding-window model's pool is understated, never overstated. With a draft
    model resident, its weights join the fixed lines and each block holds its KV too. A
    hybrid's fixed states are not set aside: each running request takes state_blocks of these
    (SchedulerConfig.state_blocks, from state_blocks below)."""
    bytes_per_block = block_bytes(plan, block_size_tokens, draft)
    extra = 0 if draft is None else draft_fixed_bytes(draft)
    blocks = kv_pool_blocks(plan, bytes_per_block, extra, unified=True) \
        if bytes_per_block > 0 else 0
    if blocks < 1:
        raise SpecError("device", plan.serve.device_label or plan.device_bytes,
                        "leaves no room for a single KV block after weights, runtime peak and "
                        "safety; shard the model with -tp N (or -pp N), as `plan -tp N` does")
    return blocks


def block_bytes(plan: Plan, block_size_tokens: int, draft: Plan | None = None) -> int:
    """One block of the simulated pool: the target's KV (and a resident draft's) for
    block_size_tokens tokens."""
    draft_kv = 0 if draft is None else draft.kv_bytes_per_token
    return (plan.kv_bytes_per_token + draft_kv) * block_size_tokens


def state_blocks(plan: Plan, block_size_tokens: int, draft: Plan | None = None) -> int:
    """Blocks a hybrid's fixed state (its Mamba / gated-DeltaNet layers' per-request state)
    takes from the pool while its request runs: ceil(state bytes / block bytes); 0 for a
    model without state layers."""
    per_block = block_bytes(plan, block_size_tokens, draft)
    state = plan.state_bytes_per_request
    return -(-state // per_block) if state and per_block else 0


class BlockPool:
    """Free blocks plus a prefix cache: a group's full prefix blocks are stored once and
    referenced by every live request of the group; unreferenced groups stay cached until their
    blocks are needed (least recently used evicted first)."""

    __slots__ = ("num_blocks", "free", "watermark_blocks", "refs", "group_blocks", "evictable",
                 "evictable_blocks", "peak_used")

    def __init__(self, num_blocks: int, watermark_blocks: int = 0) -> None:
        self.num_blocks = num_blocks
        self.free = num_blocks
        self.watermark_blocks = watermark_blocks
        self.refs: dict[str, int] = {}
        self.group_blocks: dict[str, int] = {}
        self.evictable: OrderedDict[str, int] = OrderedDict()
        self.evictable_blocks = 0
        self.peak_used = 0

    def available(self, reviving: str | None = None) -> int:
        """Blocks an allocation could obtain, counting evictable cache (less a group about to
        be revived)."""
        held = self.evictable.get(reviving, 0) if reviving is not None else 0
        return self.free + self.evictable_blocks - held

    def allocate(self, num_blocks: int, keep: int = 0) -> bool:
        """Take blocks, evicting unreferenced prefix groups if needed so that `keep` blocks
        stay free for reserved work; False if impossible."""
        while self.free < num_blocks + keep and self.evict_one():
            pass
        if self.free < num_blocks:
            return False
        self.free -= num_blocks
        used = self.num_blocks - self.free
        if used > self.peak_used:
            self.peak_used = used
        return True

    def evict_one(self) -> bool:
        """Free the least recently used unreferenced prefix group; False if there is none."""
        if not self.evictable:
            return False
        group, blocks = self.evictable.popitem(last=False)
        self.evictable_blocks -= blocks
        self.free += blocks
        del self.group_blocks[group]
        return True

    def release(self, num_blocks: int) -> None:
        self.free += num_blocks

    def is_cached(self, group: str) -> bool:
        return group in self.group_blocks

    def acquire_prefix(self, group: str, num_blocks: int) -> None:
        """Reference a group's prefix blocks; the first reference registers blocks the caller
        has already allocated."""
        if group in self.evictable:
            self.evictable_blocks -= self.evictable.pop(group)
        self.group_blocks.setdefault(group, num_blocks)
        self.refs[group] = self.refs.get(group, 0) + 1

    def release_prefix(self, group: str) -> None:
        self.refs[group] -= 1
        if self.refs[group] == 0:
            del self.refs[group]
            self.evictable[group] = self.group_blocks[group]
            self.evictable_blocks += self.group_blocks[group]

    @property
    def used_blocks(self) -> int:
        return self.num_blocks - self.free


class HostTier:
    """A host KV offload tier (vLLM's --kv-offloading-size) as the simulator keeps it: every
    computed prompt is stored, its shared prefix under its group and the rest under the request,
    least recently used evicted first when the tier's tokens run out (an entry larger than the
    tier flushes it, as its blocks would one by one). It is only ever read for
    a prefix group that has left the device's pool: that group loads back over the host link
    instead of being prefilled again. Stores cost no step time (they overlap the compute)."""

    __slots__ = ("capacity", "entries", "used", "hits", "hit_tokens")

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = capacity_tokens
        self.entries: OrderedDict[tuple[str, object], int] = OrderedDict()
        self.used = 0
        self.hits = 0
        self.hit_tokens = 0

    def store(self, key: tuple[str, object], tokens: int) -> None:
        if key in self.entries:
            self.entries.move_to_end(key)
            return
        if tokens <= 0:
            return
        self.entries[key] = tokens
        self.used += tokens
        while self.used > self.capacity:
            self.used -= self.entries.popitem(last=False)[1]

    def holds(self, group: str) -> bool:
        return ("group", group) in self.entries

    def load(self, group: str, tokens: int) -> None:
        """A prefix served from the tier: counted, and made the most recently used."""
        self.entries.move_to_end(("group", group))
        self.hits += 1
        self.hit_tokens += tokens
