"""Block manager: allocation, prefix caching, copy-on-write, fork, random-sequence properties."""

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from servecap.ledger.errors import SpecError
from servecap.runtime import block_manager
from servecap.runtime.block_manager import BlockManager


def test_allocate_and_free_returns_every_block() -> None:
    bm = BlockManager(num_blocks=8, block_size_tokens=4)
    assert bm.allocate(1, list(range(10))) == 0
    assert len(bm.block_table(1)) == 3 and bm.num_free_blocks == 5
    bm.free(1)
    assert bm.num_free_blocks == 8
    bm.check()


def test_prefix_hit_shares_full_blocks_and_compares_tokens() -> None:
    bm = BlockManager(num_blocks=8, block_size_tokens=4)
    prompt = list(range(10))
    bm.allocate(1, prompt)
    bm.mark_computed(1, prompt, 10)
    assert bm.allocate(2, prompt[:9] + [99]) == 8
    assert bm.block_table(2)[:2] == bm.block_table(1)[:2]
    assert bm.blocks[bm.block_table(1)[0]].ref_count == 2
    assert bm.allocate(3, [0, 1, 2, 7, 4, 5, 6, 7, 8]) == 0  # first block differs
    bm.check()


def test_a_hash_collision_never_serves_another_prefixs_blocks(monkeypatch) -> None:
    """Every first block hashes alike: the second block of one prompt must not be served after
    a different first block whose hash collides with it."""
    real = block_manager.chain_hash
    monkeypatch.setattr(block_manager, "chain_hash",
                        lambda parent, tokens: 7 if parent is None else real(parent, tokens))
    bm = BlockManager(num_blocks=16, block_size_tokens=4)
    for seq_id, prompt in ((1, [9, 9, 9, 9, 3]), (2, [1, 2, 3, 4, 5, 6, 7, 8, 0])):
        bm.allocate(seq_id, prompt)
        bm.mark_computed(seq_id, prompt, len(prompt))
    assert bm.allocate(3, [9, 9, 9, 9, 5, 6, 7, 8, 0]) == 4  # only the true first block
    assert bm.block_table(3)[1] != bm.block_table(2)[1]
    assert bm.allocate(4, [1, 2, 3, 4, 5, 6, 7, 8, 1]) == 0  # its first block lost the key
    bm.check()


def test_a_reused_block_breaks_the_chain_behind_it() -> None:
    """A block recycled for other tokens must not let its old successors be served."""
    bm = BlockManager(num_blocks=3, block_size_tokens=2)
    prompt = [1, 2, 3, 4, 5]
    bm.allocate(1, prompt)
    bm.mark_computed(1, prompt, 5)
    bm.free(1)  # free list, oldest first: the tail block, the second, the first
    bm.allocate(2, [8])  # takes the tail block
    bm.allocate(3, [8, 9, 7])  # takes the second block, then the first: both forgotten
    bm.free(2)
    bm.free(3)
    assert bm.allocate(4, prompt) == 0
    bm.check()


def test_last_token_is_never_served_from_cache() -> None:
    bm = BlockManager(num_blocks=8, block_size_tokens=4)
    prompt = list(range(8))
    bm.allocate(1, prompt)
    bm.mark_computed(1, prompt, 8)
    assert bm.allocate(2, prompt) == 4


def test_freed_blocks_stay_cached_until_reused() -> None:
    bm = BlockManager(num_blocks=4, block_size_tokens=2)
    prompt = [5, 6, 7, 8, 9]
    bm.allocate(1, prompt)
    bm.mark_computed(1, prompt, 5)
    bm.free(1)
    assert bm.allocation_cost(prompt) == 3  # freed hits still leave the free list
    assert bm.allocate(2, prompt) == 4
    bm.check()


def test_no_prefix_caching_means_no_hits() -> None:
    bm = BlockManager(num_blocks=8, block_size_tokens=4, enable_prefix_caching=False)
    prompt = list(range(10))
    bm.allocate(1, prompt)
    bm.mark_computed(1, prompt, 10)
    assert bm.allocate(2, prompt) == 0


def test_fork_shares_and_copy_on_write_splits_the_partial_block() -> None:
    bm = BlockManager(num_blocks=8, block_size_tokens=4)
    bm.allocate(1, list(range(6)))
    bm.fork(1, 2)
    shared = bm.block_table(1)[1]
    assert bm.blocks[shared].ref_count == 2
    assert bm.write_cost(2, 6, 7) == 1
    copies = bm.prepare_write(2, 6, 7)
    assert copies == [(shared, bm.block_table(2)[1])] and bm.block_table(2)[1] != shared
    assert bm.prepare_write(1, 6, 7) == []  # now private again: written in place
    bm.check()


def test_growth_past_the_pool_is_refused() -> None:
    bm = BlockManager(num_blocks=2, block_size_tokens=4)
    bm.allocate(1, list(range(8)))
    assert bm.write_cost(1, 8, 9) == 1
    with pytest.raises(MemoryError):
        bm.prepare_write(1, 8, 9)
    bm.check()


def test_empty_sequence_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="at least one token"):
        BlockManager(4, 4).allocate(1, [])


class BlockMachine(RuleBasedStateMachine):
    """Random allocate/append/fork/free sequences against the invariants. `slots` models the
    pool: each written slot holds the whole prefix its K/V was computed from, so a prefix hit
    or a copy-on-write that hands over the wrong K/V is caught."""

    @initialize(num_blocks=st.integers(1, 24), bsz=st.integers(1, 5), caching=st.booleans())
    def setup(self, num_blocks: int, bsz: int, caching: bool) -> None:
        self.bm = BlockManager(num_blocks, bsz, caching)
        self.tokens: dict[int, list[int]] = {}
        self.slots: dict[tuple[int, int], tuple[int, ...]] = {}  # (block, offset) -> prefix
        self.next_id = 0

    def _write(self, seq_id: int, tokens: list[int], start: int, end: int) -> None:
        bsz, table = self.bm.block_size_tokens, self.bm.block_table(seq_id)
        for pos in range(start, end):
            self.slots[(table[pos // bsz], pos % bsz)] = tuple(tokens[:pos + 1])

    def _check_reads(self, seq_id: int, tokens: list[int], end: int) -> None:
        """Attention over [0, end) reads exactly this sequence's own prefixes."""
        bsz, table = self.bm.block_size_tokens, self.bm.block_table(seq_id)
        for pos in range(end):
            assert self.slots.get((table[pos // bsz], pos % bsz)) == tuple(tokens[:pos + 1])

    @rule(prompt=st.lists(st.integers(0, 3), min_size=1, max_size=20))
    def allocate(self, prompt: list[int]) -> None:
        if not self.bm.can_allocate(prompt):
            with pytest.raises(MemoryError):
                self.bm.allocate(self.next_id, prompt)
            return
        cached = self.bm.allocate(self.next_id, prompt)
        assert cached < len(prompt) and cached % self.bm.block_size_tokens == 0
        self._check_reads(self.next_id, prompt, cached)  # the hits hold this very prefix
        self._write(self.next_id, prompt, cached, len(prompt))
        self.bm.mark_computed(self.next_id, prompt, len(prompt))
        self.tokens[self.next_id] = list(prompt)
        self.next_id += 1

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), token=st.integers(0, 3))
    def append(self, data, token: int) -> None:
        seq_id = data.draw(st.sampled_from(sorted(self.tokens)))
        tokens = self.tokens[seq_id]
        n = len(tokens)
        if self.bm.write_cost(seq_id, n, n + 1) > self.bm.num_free_blocks:
            return
        copies = self.bm.prepare_write(seq_id, n, n + 1)
        bsz = self.bm.block_size_tokens
        for src, dst in copies:
            for offset in range(bsz):
                self.slots.pop((dst, offset), None)
                if (src, offset) in self.slots:
                    self.slots[(dst, offset)] = self.slots[(src, offset)]
        tokens.append(token)
        self._write(seq_id, tokens, n, n + 1)
        self._check_reads(seq_id, tokens, n + 1)
        self.bm.mark_computed(seq_id, tokens, n + 1)
        assert len(self.bm.block_table(seq_id)) * self.bm.block_size_tokens >= n + 1

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def fork(self, data) -> None:
        parent = data.draw(st.sampled_from(sorted(self.tokens)))
        self.bm.fork(parent, self.next_id)
        self.tokens[self.next_id] = list(self.tokens[parent])
        self.next_id += 1

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def free(self, data) -> None:
        seq_id = data.draw(st.sampled_from(sorted(self.tokens)))
        self.bm.free(seq_id)
        del self.tokens[seq_id]

    @invariant()
    def holds(self) -> None:
        if hasattr(self, "bm"):
            self.bm.check()
            self._private_blocks_owned_once()

    def _private_blocks_owned_once(self) -> None:
        """A block in two tables is shared (ref_count >= 2); a written block is never shared
        with a sequence whose tokens there differ."""
        bsz = self.bm.block_size_tokens
        owners: dict[int, list[tuple[int, ...]]] = {}
        for seq_id, table in self.bm.tables.items():
            tokens = self.tokens[seq_id]
            for index, block_id in enumerate(table):
                written = tuple(tokens[index * bsz:(index + 1) * bsz])
                owners.setdefault(block_id, []).append((index, written))
        for block_id, uses in owners.items():
            assert self.bm.blocks[block_id].ref_count == len(uses)
            assert len({index for index, _ in uses}) == 1, "a block at two table positions"
            shortest = min(len(w) for _, w in uses)
            assert len({w[:shortest] for _, w in uses}) == 1, "shared block, different tokens"

    def teardown(self) -> None:
        if hasattr(self, "bm"):
            for seq_id in list(self.tokens):
                self.bm.free(seq_id)
            assert self.bm.num_free_blocks == self.bm.num_blocks
            self.bm.check()


BlockMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                          deadline=None)
test_block_machine = BlockMachine.TestCase


class CollidingBlockMachine(BlockMachine):
    """The same machine with a hash that collides all the time (three values): hits must still
    hand over only the sequence's own prefix."""

    @initialize(num_blocks=st.integers(1, 24), bsz=st.integers(1, 5), caching=st.booleans())
    def setup(self, num_blocks: int, bsz: int, caching: bool) -> None:
        self._real_hash = block_manager.chain_hash
        block_manager.chain_hash = lambda parent, tokens: self._real_hash(parent, tokens) % 3
        super().setup(num_blocks, bsz, caching)

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            if hasattr(self, "_real_hash"):
                block_manager.chain_hash = self._real_hash


CollidingBlockMachine.TestCase.settings = BlockMachine.TestCase.settings
test_colliding_block_machine = CollidingBlockMachine.TestCase
