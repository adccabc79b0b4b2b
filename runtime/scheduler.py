"""Iteration-level scheduling: decodes first, then prefill chunks, then admissions, in a budget.

Every step spends at most max_num_batched_tokens: one token per decoding sequence, then chunks
of unfinished prompts, then the first chunk of newly admitted requests (first come, first
served). A sequence that cannot grow is preempted by recompute: the most recently admitted one
gives its blocks back and returns to the head of the queue.
"""

from collections import deque
from dataclasses import dataclass, field

from servecap.ledger.paging import blocks_for, windowed_blocks

from .block_manager import BlockManager
from .sequence import RUNNING, WAITING, Sequence
from .state_pool import StateSlots


@dataclass
class StepPlan:
    """chunks: (sequence, tokens to compute from its num_computed_tokens), decodes first."""

    chunks: list[tuple[Sequence, int]] = field(default_factory=list)
    copies_by_seq: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    admitted: list[Sequence] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        return sum(n for _, n in self.chunks)

    @property
    def copies(self) -> list[tuple[int, int]]:
        """(source, destination) block copies to make before the forward pass."""
        return [pair for pairs in self.copies_by_seq.values() for pair in pairs]

    def drop(self, seq: Sequence) -> None:
        """Unschedule a sequence preempted after it was scheduled this step."""
        self.chunks = [c for c in self.chunks if c[0] is not seq]
        self.copies_by_seq.pop(seq.seq_id, None)


class Scheduler:
    """reserve_full_context: admit a request only when blocks for its whole declared length
    (prompt + output tokens) are free beyond what running requests may still need, so nothing
    is ever preempted and residency never exceeds the memory ceiling. Off, admission needs only
    the prompt's blocks (vLLM's optimistic policy) and decode growth may preempt.

    Blocks are allocated one scheduled chunk at a time (a prompt's first chunk at admission,
    each later chunk before it runs), as vLLM's allocate_slots does.

    window_tokens: every layer attends only to the last W tokens (set only when all layers are
    windowed: the KV pool is shared by all layers, so a full layer keeps every block). Before a
    sequence computes from position p, its blocks wholly before p - W + 1 are freed, and its
    growth is counted up to paging.windowed_blocks, the ledger's windowed line: the in-flight
    prefill peak of a request of its length with chunks of up to max_num_batched_tokens.

    slots: hybrids' state slots; a running sequence holds one (and keeps one free for each
    sample it has yet to fork), taken at admission, given back when it finishes or is
    preempted."""

    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_num_batched_tokens: int,
                 reserve_full_context: bool = True, window_tokens: int | None = None,
                 slots: StateSlots | None = None, window_budget_tokens: int | None = None
                 ) -> None:
        self.blocks, self.slots = blocks, slots
        self.window_budget_tokens = window_budget_tokens or max_num_batched_tokens
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.reserve_full_context = reserve_full_context
        self.window_tokens = window_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def schedule(self) -> StepPlan:
        plan = StepPlan()
        decoding = [s for s in self.running if s.num_uncomputed == 1]
        prefilling = [s for s in self.running if s.num_uncomputed > 1]
        for seq in decoding + prefilling:
            budget = self.max_num_batched_tokens - plan.num_batched_tokens
            if budget == 0:
                break
            if seq.status == RUNNING:
                self._grow(seq, min(seq.num_uncomputed, budget), plan)
        if not plan.preempted:
            self._admit(self.max_num_batched_tokens - plan.num_batched_tokens, plan)
        plan.chunks.sort(key=lambda chunk: chunk[1] > 1)  # one-token rows first
        return plan

    def _grow(self, seq: Sequence, num_tokens: int, plan: StepPlan) -> None:
        """Make room for num_tokens more; preempt the newest sequences (possibly this one)."""
        start = seq.num_computed_tokens
        if self.window_tokens:
            self.blocks.free_out_of_window(seq.seq_id, max(0, start - self.window_tokens + 1))
        while self.blocks.write_cost(seq.seq_id, start, start + num_tokens) > \
                self.blocks.num_free_blocks:
            victim = self.running[-1]
            self.preempt(victim)
            plan.drop(victim)
            plan.preempted.append(victim)
            if victim is seq:
                return
        copies = self.blocks.prepare_write(seq.seq_id, start, start + num_tokens)
        plan.copies_by_seq[seq.seq_id] = copies
        plan.chunks.append((seq, num_tokens))

    def _admit(self, budget: int, plan: StepPlan) -> None:
        while self.waiting and budget > 0:
            seq = self.waiting[0]
            if self._num_seqs() + seq.parallel > self.max_num_seqs:
                return
            # the first chunk's blocks (after any cached prefix), and room for the rest
            upto = min(len(seq.token_ids), self.blocks.cached_tokens(seq.token_ids) + budget)
            if not self.blocks.can_allocate(seq.token_ids, self._reserve(seq, upto), upto):
                return
            if self.slots is not None and self.slots.num_free - self._unforked() < seq.parallel:
                return
            self.waiting.popleft()
            if self.slots is not None:
                seq.state_slot = self.slots.take()
            seq.num_computed_tokens = self.blocks.allocate(seq.seq_id, seq.token_ids, upto)
            seq.record.num_cached_tokens = seq.num_computed_tokens
            if self.window_tokens:
                self.blocks.free_out_of_window(seq.seq_id, max(
                    0, seq.num_computed_tokens - self.window_tokens + 1))
            seq.status = RUNNING
            self.running.append(seq)
            plan.admitted.append(seq)
            num_tokens = upto - seq.num_computed_tokens
            plan.chunks.append((seq, num_tokens))
            budget -= num_tokens

    def _unforked(self) -> int:
        """State slots the running sequences' samples take when they fork."""
        return sum(s.parallel - 1 for s in self.running)

    def _num_seqs(self) -> int:
        """Running sequences, counting the samples a request with n > 1 forks after prefill."""
        return sum(s.parallel for s in self.running)

    def _reserve(self, seq: Sequence, upto: int | None = None) -> int:
        """Blocks to keep back when admitting seq with blocks for its first `upto` tokens: its
        own growth to full length (every forked sample's private blocks too) plus what the
        running sequences may still take."""
        if not self.reserve_full_context:
            return 0
        return self._own_growth(seq, upto) + sum(self._future_blocks(s) for s in self.running)

    def _own_growth(self, seq: Sequence, upto: int | None = None) -> int:
        """Blocks a waiting request takes after the ones allocated at admission (its first
        `upto` tokens; the whole prompt by default): growth to its peak; with n > 1 the
        rest of the prompt and every sample's private blocks past the shared full ones."""
        bsz = self.blocks.block_size_tokens
        first = blocks_for(len(seq.token_ids) if upto is None else upto, bsz)
        if seq.parallel > 1:
            rest = blocks_for(len(seq.token_ids), bsz) - first
            return rest + seq.parallel * (blocks_for(seq.max_tokens, bsz)
                                          - len(seq.token_ids) // bsz)
        return max(0, self._final_blocks(seq) - first)

    def _final_blocks(self, seq: Sequence) -> int:
        """The most blocks seq ever holds: all of them, or with a window the ledger's
        windowed count at its peak (paging.windowed_blocks: the in-flight prefill of a request
        of its length, chunks of up to max_num_batched_tokens)."""
        bsz = self.blocks.block_size_tokens
        if self.window_tokens:
            return windowed_blocks(seq.max_tokens, self.window_tokens, bsz,
                                   self.window_budget_tokens)
        return blocks_for(seq.max_tokens, bsz)

    def blocks_needed_alone(self, seq: Sequence) -> int:
        """What admitting seq into an empty pool reserves (reserve_full_context), or the most
        it holds when it runs alone (a window: its own prompt's prefill or its decode window):
        a request needing more than the whole pool can never run."""
        bsz = self.blocks.block_size_tokens
        if self.reserve_full_context or not self.window_tokens or seq.parallel > 1:
            return blocks_for(len(seq.token_ids), bsz) + self._own_growth(seq)
        return windowed_blocks(seq.max_tokens, self.window_tokens, bsz,
                               self.window_budget_tokens, len(seq.token_ids))

    def _future_blocks(self, seq: Sequence) -> int:
        """Blocks a running sequence may still take: growth, a copy of each shared block it
        will write into, and the private blocks of the samples it has yet to fork."""
        bsz = self.blocks.block_size_tokens
        table = self.blocks.block_table(seq.seq_id)
        grow = max(0, self._final_blocks(seq) - self.blocks.num_live_blocks(seq.seq_id))
        first_written = seq.num_computed_tokens // bsz
        shared = sum(1 for b in table[first_written:] if self.blocks.blocks[b].ref_count > 1)
        forks = (seq.parallel - 1) * (blocks_for(seq.max_tokens, bsz) -
                                      seq.num_prompt_tokens // bsz)
        return grow + shared + forks

    def preempt(self, seq: Sequence) -> None:
        """Recompute later: drop its K/V (and state) now, keep its tokens, requeue it at the
        front."""
        self.blocks.free(seq.seq_id)
        self._release_slot(seq)
        self.running.remove(seq)
        seq.num_computed_tokens = 0
        seq.status = WAITING
        seq.record.num_preemptions += 1
        self.waiting.appendleft(seq)

    def release(self, seq: Sequence) -> None:
        """A finished or cancelled sequence gives every block back at once."""
        if seq in self.running:
            self.blocks.free(seq.seq_id)
            self._release_slot(seq)
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def _release_slot(self, seq: Sequence) -> None:
        if self.slots is not None and seq.state_slot is not None:
            self.slots.release(seq.state_slot)
            seq.state_slot = None
