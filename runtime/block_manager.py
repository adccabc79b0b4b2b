"""Paged KV block accounting: free list, block tables, refcounts, prefix cache, copy-on-write.

Plain Python: the block manager decides which physical block holds which tokens; the KV pool
(kv_pool.py) holds the bytes. A block is `block_size_tokens` slots in every layer.
"""

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from servecap.ledger.errors import SpecError
from servecap.ledger.paging import blocks_for, check_block_size

NO_HASH: int | None = None


@dataclass
class Block:
    """One physical block. `content_hash` is set once the block is full and its KV computed; it
    chains the hash of the block before it, so equal prefixes give equal hashes. `serial` names
    this registration uniquely and `parent_serial` the block it followed, so a hit is checked
    exactly (tokens and predecessor), whatever the hashes collide on."""

    block_id: int
    ref_count: int = 0
    content_hash: int | None = NO_HASH
    serial: int | None = None
    parent_serial: int | None = None
    token_ids: tuple[int, ...] = ()


def chain_hash(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
    """hash(previous block's hash, this block's tokens): ints and tuples hash the same in every
    process, so the cache is deterministic."""
    return hash((parent_hash, token_ids))


class BlockManager:
    """Owns every block id in [0, num_blocks). A sequence's block table lists its blocks in
    token order; a block listed in k tables has ref_count k."""

    def __init__(self, num_blocks: int, block_size_tokens: int,
                 enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1:
            raise SpecError("num_blocks", num_blocks, "the KV pool needs at least one block")
        self.block_size_tokens = check_block_size(block_size_tokens)
        self.num_blocks = num_blocks
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_ids: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.cached: dict[int, int] = {}  # content hash -> block id
        self.tables: dict[int, list[int]] = {}
        self.num_hashed: dict[int, int] = {}  # seq id -> leading blocks already hashed
        # table entry of a block freed out of a sliding window: the KV pool's null block
        self.null_block = num_blocks
        # seq id -> (content hash, serial) of its freed blocks by table index, for hash chaining
        self.freed: dict[int, dict[int, tuple[int | None, int | None]]] = {}
        self._serials = itertools.count()

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_ids)

    def block_table(self, seq_id: int) -> list[int]:
        return self.tables[seq_id]

    # -- allocation -----------------------------------------------------------------------
    def prefix_hits(self, token_ids: list[int]) -> list[int]:
        """Cached blocks holding this prompt's leading full blocks, tokens compared. The last
        token is never served from cache: its forward pass yields the next token's logits."""
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        parent: Block | None = None
        bsz = self.block_size_tokens
        for start in range(0, len(token_ids) - 1 - bsz + 1, bsz):
            tokens = tuple(token_ids[start:start + bsz])
            block_id = self.cached.get(chain_hash(parent and parent.content_hash, tokens))
            if block_id is None or not self._same(self.blocks[block_id], parent, tokens):
                break
            hits.append(block_id)
            parent = self.blocks[block_id]
        return hits

    @staticmethod
    def _same(block: Block, parent: Block | None, tokens: tuple[int, ...]) -> bool:
        """The block holds these tokens and was computed right after `parent` (by induction,
        after this whole prefix): a hash collision cannot serve another prefix's K/V."""
        return block.parent_serial == (parent and parent.serial) and block.token_ids == tokens

    def allocation_cost(self, token_ids: list[int], num_tokens: int | None = None) -> int:
        """Free blocks that allocate(token_ids, num_tokens) would take: cache hits on blocks
        another sequence holds are free of charge; hits on freed (cached) blocks still leave
        the list."""
        hits = self.prefix_hits(token_ids)
        shared = sum(1 for b in hits if self.blocks[b].ref_count > 0)
        return self._blocks_upto(token_ids, num_tokens, hits) - shared

    def can_allocate(self, token_ids: list[int], extra_blocks: int = 0,
                     num_tokens: int | None = None) -> bool:
        return self.allocation_cost(token_ids, num_tokens) + extra_blocks <= self.num_free_blocks

    def cached_tokens(self, token_ids: list[int]) -> int:
        """Leading tokens allocate() would serve from the prefix cache."""
        return len(self.prefix_hits(token_ids)) * self.block_size_tokens

    def _blocks_upto(self, token_ids: list[int], num_tokens: int | None,
                     hits: list[int]) -> int:
        """Blocks covering the first num_tokens tokens (all of them by default), and never fewer
        than the cache hits."""
        upto = len(token_ids) if num_tokens is None else min(num_tokens, len(token_ids))
        return max(len(hits), blocks_for(upto, self.block_size_tokens))

    def allocate(self, seq_id: int, token_ids: list[int], num_tokens: int | None = None) -> int:
        """Blocks for the first num_tokens tokens of `token_ids` (every token by default: a
        scheduler allocates one chunk at a time and grows the table with prepare_write);
        returns how many leading tokens are already computed (prefix-cache hits)."""
        if seq_id in self.tables:
            raise ValueError(f"sequence {seq_id} already holds blocks")
        if not token_ids:
            raise SpecError("prompt_tokens", 0, "a sequence needs at least one token")
        if not self.can_allocate(token_ids, num_tokens=num_tokens):
            raise MemoryError(f"sequence {seq_id}: not enough free KV blocks")
        hits = self.prefix_hits(token_ids)
        for block_id in hits:
            self._retain(block_id)
        fresh = self._blocks_upto(token_ids, num_tokens, hits) - len(hits)
        self.tables[seq_id] = hits + [self._take_free() for _ in range(fresh)]
        self.num_hashed[seq_id] = len(hits)
        return len(hits) * self.block_size_tokens

    def _retain(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free_ids[block_id]
        block.ref_count += 1

    def _take_free(self) -> int:
        """The least recently freed block; whatever it cached is forgotten."""
        block_id, _ = self.free_ids.popitem(last=False)
        block = self.blocks[block_id]
        self._forget(block)
        block.ref_count = 1
        return block_id

    def _forget(self, block: Block) -> None:
        if block.content_hash is not NO_HASH and self.cached.get(block.content_hash) == \
                block.block_id:
            del self.cached[block.content_hash]
        block.content_hash = NO_HASH
        block.serial = block.parent_serial = None
        block.token_ids = ()

    # -- growth and copy-on-write ---------------------------------------------------------
    def write_cost(self, seq_id: int, start: int, end: int) -> int:
        """Free blocks needed before tokens [start, end) can be written: new blocks past the
        table's end, plus a private copy of each shared block written into."""
        table, bsz = self.tables[seq_id], self.block_size_tokens
        first, last = start // bsz, (end - 1) // bsz
        new = max(0, last + 1 - len(table))
        shared = sum(1 for i in range(first, min(last + 1, len(table)))
                     if self.blocks[table[i]].ref_count > 1)
        return new + shared

    def prepare_write(self, seq_id: int, start: int, end: int) -> list[tuple[int, int]]:
        """Make tokens [start, end) writable; returns (source, destination) block copies the
        KV pool must make first (copy-on-write of shared blocks)."""
        if self.write_cost(seq_id, start, end) > self.num_free_blocks:
            raise MemoryError(f"sequence {seq_id}: not enough free KV blocks to grow")
        table, bsz = self.tables[seq_id], self.block_size_tokens
        copies = []
        for index in range(start // bsz, (end - 1) // bsz + 1):
            if index == len(table):
                table.append(self._take_free())
                continue
            block = self.blocks[table[index]]
            if block.ref_count > 1:
                block.ref_count -= 1
                table[index] = self._take_free()
                copies.append((block.block_id, table[index]))
            elif block.content_hash is not NO_HASH:
                self._forget(block)  # its tokens are about to change
        self.num_hashed[seq_id] = min(self.num_hashed[seq_id], start // bsz)
        return copies

    def mark_computed(self, seq_id: int, token_ids: list[int], num_computed_tokens: int) -> None:
        """Register every full block whose KV is now written, so later prompts can reuse it."""
        if not self.enable_prefix_caching:
            return
        table, bsz = self.tables[seq_id], self.block_size_tokens
        done = self.num_hashed[seq_id]
        parent_hash, parent_serial = self._identity(seq_id, done - 1) if done else (None, None)
        for index in range(done, num_computed_tokens // bsz):
            block = self.blocks[table[index]]
            if block.content_hash is NO_HASH:
                block.token_ids = tuple(token_ids[index * bsz:(index + 1) * bsz])
                block.parent_serial = parent_serial
                block.serial = next(self._serials)
                block.content_hash = chain_hash(parent_hash, block.token_ids)
                self.cached.setdefault(block.content_hash, block.block_id)
            parent_hash, parent_serial = block.content_hash, block.serial
        self.num_hashed[seq_id] = max(done, num_computed_tokens // bsz)

    def _identity(self, seq_id: int, index: int) -> tuple[int | None, int | None]:
        """(content hash, serial) of a table entry, also once it was freed out of the window."""
        block_id = self.tables[seq_id][index]
        if block_id == self.null_block:
            return self.freed[seq_id][index]
        block = self.blocks[block_id]
        return block.content_hash, block.serial

    # -- sliding windows ------------------------------------------------------------------
    def free_out_of_window(self, seq_id: int, num_skipped_tokens: int) -> int:
        """Free the blocks wholly before token num_skipped_tokens, which no later query reads
        (vLLM SlidingWindowManager.remove_skipped_blocks); their table entries become the
        null block. Returns how many blocks this freed."""
        table = self.tables[seq_id]
        freed = self.freed.setdefault(seq_id, {})
        count = 0
        for index in range(min(num_skipped_tokens // self.block_size_tokens, len(table)) - 1,
                           -1, -1):
            if table[index] == self.null_block:
                break  # everything before it went in an earlier call
            block = self.blocks[table[index]]
            freed[index] = (block.content_hash, block.serial)
            self._release(block)
            table[index] = self.null_block
            count += 1
        return count

    def num_live_blocks(self, seq_id: int) -> int:
        """Entries of the table that hold a block (not freed out of the window)."""
        return sum(1 for b in self.tables[seq_id] if b != self.null_block)

    # -- sharing and release --------------------------------------------------------------
    def fork(self, parent_id: int, child_id: int) -> None:
        """The child shares every block of the parent (parallel sampling shares the prompt);
        the first write into a shared block copies it."""
        if child_id in self.tables:
            raise ValueError(f"sequence {child_id} already holds blocks")
        table = list(self.tables[parent_id])
        for block_id in table:
            if block_id != self.null_block:
                self.blocks[block_id].ref_count += 1
        self.tables[child_id] = table
        self.num_hashed[child_id] = self.num_hashed[parent_id]
        if parent_id in self.freed:
            self.freed[child_id] = dict(self.freed[parent_id])

    def free(self, seq_id: int) -> None:
        """Release a sequence's blocks at once; blocks nobody else holds return to the free list
        (tail first, so a prompt's head stays cached longest)."""
        for block_id in reversed(self.tables.pop(seq_id)):
            if block_id != self.null_block:
                self._release(self.blocks[block_id])
        del self.num_hashed[seq_id]
        self.freed.pop(seq_id, None)

    def _release(self, block: Block) -> None:
        if block.ref_count <= 0:
            raise AssertionError(f"block {block.block_id} freed with ref_count {block.ref_count}")
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_ids[block.block_id] = None

    def check(self) -> None:
        """Invariants: ref_count = number of tables listing the block; free iff ref_count 0."""
        counts = [0] * self.num_blocks
        for table in self.tables.values():
            for block_id in table:
                if block_id != self.null_block:
                    counts[block_id] += 1
        for block in self.blocks:
            assert block.ref_count == counts[block.block_id] >= 0, block
            assert (block.ref_count == 0) == (block.block_id in self.free_ids), block
        for content_hash, block_id in self.cached.items():
            assert self.blocks[block_id].content_hash == content_hash
