"""Paged KV rounding: requests occupy whole blocks; shared prefix blocks are counted once."""

from dataclasses import dataclass

from .errors import SpecError


@dataclass(frozen=True)
class BlockReport:
    """Physical occupancy of a set of live sequence lengths at one block size.

    logical_tokens counts every sequence's tokens (a shared prefix once per sequence);
    stored_tokens counts what the slots hold (a shared prefix's full blocks once), so
    stored_tokens + unused_slot_tokens == slot_tokens."""

    block_size_tokens: int
    logical_tokens: int
    stored_tokens: int
    num_blocks: int
    slot_tokens: int
    unused_slot_tokens: int
    block_table_entries: int
    shared_blocks: int = 0


def blocks_for(num_tokens: int, block_size_tokens: int) -> int:
    """ceil(S / B): blocks one sequence of S tokens occupies."""
    return -(-num_tokens // block_size_tokens)


def window_blocks(num_tokens: int, window_tokens: int, block_size_tokens: int) -> int:
    """min(ceil(S / B), 1 + ceil((W - 1) / B)): blocks a sliding-window layer holds for a
    sequence of S tokens in a paged engine that frees blocks wholly out of the window (vLLM's
    SlidingWindowManager.remove_skipped_blocks). The token being written sees itself and the
    W - 1 before it; a span of W tokens that starts on a block's last slot covers
    1 + ceil((W - 1) / B) blocks, and the span slides through every offset as decode proceeds."""
    held = 1 + blocks_for(window_tokens - 1, block_size_tokens)
    return min(blocks_for(num_tokens, block_size_tokens), held)


def prefill_window_blocks(prompt_tokens: int, window_tokens: int, block_size_tokens: int,
                          max_num_batched_tokens: int) -> int:
    """min(ceil(P / B), ceil(min(W - 1 + T, P) / B) + 1): the most blocks a sliding-window
    layer holds while a prompt of P tokens is prefilled in chunks of at most T tokens, each
    chunk's blocks allocated before it runs and the blocks wholly before its window freed
    (vLLM's SlidingWindowSpec.max_memory_usage_bytes with max_model_len = P, never more than
    the prompt's own blocks). A chunk from position s attends from s - W + 1: it holds the
    W - 1 tokens before it and its own n <= T, +1 block where the span straddles one."""
    span = min(window_tokens - 1 + max_num_batched_tokens, prompt_tokens)
    return min(blocks_for(prompt_tokens, block_size_tokens),
               blocks_for(span, block_size_tokens) + 1)


def windowed_blocks(num_tokens: int, window_tokens: int, block_size_tokens: int,
                    max_num_batched_tokens: int | None = None,
                    prompt_tokens: int | None = None) -> int:
    """Blocks a sliding-window layer holds for a request of S tokens at its peak: the steady
    decode hold (window_blocks) when no token budget is given, else the larger of that and the
    in-flight prefill peak of its prompt (prefill_window_blocks; the prompt is the whole
    request unless stated, the most it can be)."""
    hold = window_blocks(num_tokens, window_tokens, block_size_tokens)
    if max_num_batched_tokens is None:
        return hold
    prompt = num_tokens if prompt_tokens is None else prompt_tokens
    return max(hold, prefill_window_blocks(prompt, window_tokens, block_size_tokens,
                                           max_num_batched_tokens))


def check_block_size(block_size_tokens: int) -> int:
    if block_size_tokens < 1:
        raise SpecError("--block-size", block_size_tokens, "must be a whole number of tokens >= 1")
    return block_size_tokens


def check_lengths(lengths, field: str = "lengths") -> None:
    """Every live sequence holds at least one token (plan's --lengths, blocks' LENGTHS)."""
    if any(n < 1 for n in lengths):
        raise SpecError(field, ",".join(map(str, lengths)), "every live length must be >= 1 "
                        "token")


def check_shared_prefix(lengths, prefix: int, field: str = "--shared-prefix",
                        what: str = "sequence") -> None:
    """A prefix shared by every live sequence fits in the shortest of them (plan's --lengths,
    blocks' LENGTHS), and is not negative; `what` names the lengths as the command took
    them."""
    if prefix < 0:
        raise SpecError(field, prefix, "must be >= 0 tokens")
    if lengths and prefix > min(lengths):
        raise SpecError(field, prefix, f"at most the shortest {what} ({min(lengths):,} "
                        "tokens): every sequence holds the whole prefix")


def paging_report(lengths: list[int], block_size_tokens: int,
                  shared_prefix_tokens: int = 0) -> BlockReport:
    """Σ ceil(S_r / B) blocks (seed 000). With a prefix shared by every request, its full blocks
    are stored once and referenced by each block table; the partial last prefix block is not
    shareable (it would be written) and stays private. A request shorter than the prefix is all
    prefix: sharing is capped at the shortest length."""
    check_block_size(block_size_tokens)
    check_lengths(lengths)
    if shared_prefix_tokens < 0:
        raise SpecError("shared_prefix", shared_prefix_tokens, "must be >= 0 tokens")
    shared = min([shared_prefix_tokens, *lengths]) // block_size_tokens if lengths else 0
    entries = sum(blocks_for(n, block_size_tokens) for n in lengths)
    physical = entries - shared * max(len(lengths) - 1, 0)
    logical = sum(lengths)
    stored = logical - shared * block_size_tokens * max(len(lengths) - 1, 0)
    slots = physical * block_size_tokens
    return BlockReport(block_size_tokens, logical, stored, physical, slots, slots - stored,
                       entries, shared)
