"""One forward pass over a scheduled step: flatten chunks into a paged batch, run, sample."""

import torch

from servecap.ledger.runtime_estimate import group_tokens

from .attention import PagedBatch, PagedKV, PrefillSpan
from .block_manager import BlockManager
from .kv_pool import KVPool
from .model import Decoder
from .sequence import Sequence
from .state_pool import StatePool, StateSpan, StateStep


def build_batch(chunks: list[tuple[Sequence, int]], blocks: BlockManager, pool: KVPool,
                device: torch.device, states: StatePool | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, PagedBatch]:
    """Token ids (T,), positions (T,) and the paged layout (with the state pool, each
    sequence's state slot); one-token chunks must come first."""
    bsz = pool.block_size_tokens
    ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    decode_tables, decode_lens, prefills, seq_lens = [], [], [], []
    for seq, num_tokens in chunks:
        start, table = seq.num_computed_tokens, blocks.block_table(seq.seq_id)
        end = start + num_tokens
        if num_tokens == 1:
            decode_tables.append(table[:-(-end // bsz)])
            decode_lens.append(end)
        else:
            prefills.append(PrefillSpan(len(ids), num_tokens, end,
                                        torch.tensor(table[:-(-end // bsz)], device=device)))
        ids += seq.token_ids[start:end]
        seq_lens += [end] * num_tokens
        positions += range(start, end)
        slots += [table[p // bsz] * bsz + p % bsz for p in range(start, end)]
    width = max((len(t) for t in decode_tables), default=0)
    padded = [t + [pool.null_block] * (width - len(t)) for t in decode_tables]
    tables = torch.tensor(padded, device=device, dtype=torch.long).view(len(padded), width)
    batch = PagedBatch(torch.tensor(slots, device=device), len(decode_tables), tables,
                       torch.tensor(decode_lens, device=device, dtype=torch.long), prefills,
                       torch.tensor(seq_lens, device=device))
    if states is not None:
        batch.states = state_step(chunks, states, device)
    return (torch.tensor(ids, device=device), torch.tensor(positions, device=device), batch)


def state_step(chunks: list[tuple[Sequence, int]], states: StatePool,
               device: torch.device) -> StateStep:
    """Each chunk's state slot; a chunk from position 0 starts a fresh state."""
    decode = [seq.state_slot for seq, n in chunks if n == 1]
    spans, row = [], len(decode)
    for seq, n in chunks:
        if n > 1:
            spans.append(StateSpan(slice(row, row + n), seq.state_slot,
                                   seq.num_computed_tokens == 0))
            row += n
    return StateStep(states, torch.tensor(decode, device=device, dtype=torch.long), spans)


@torch.inference_mode()
def forward_step(model: Decoder, pool: KVPool, blocks: BlockManager,
                 chunks: list[tuple[Sequence, int]], states: StatePool | None = None
                 ) -> tuple[torch.Tensor, list[Sequence]]:
    """Run the chunks; returns fp32 logits (R, V) for each sequence whose chunk reaches its last
    known token (it gets a new token), and those sequences in row order."""
    ids, positions, batch = build_batch(chunks, blocks, pool, model.device, states)
    hidden = model(ids, positions, PagedKV(pool, batch), batch.seq_lens)  # (T, H)
    rows, ready, row = [], [], 0
    for seq, num_tokens in chunks:
        row += num_tokens
        if seq.num_computed_tokens + num_tokens == len(seq.token_ids):
            rows.append(row - 1)
            ready.append(seq)
    if not rows:
        return hidden.new_zeros(0, model.spec.vocab_size, dtype=torch.float32), ready
    return model.logits(hidden[torch.tensor(rows, device=hidden.device)]), ready


def sample(logits: torch.Tensor, temperatures: list[float],
           generators: list[torch.Generator | None]) -> list[int]:
    """Greedy argmax where temperature is 0; else a draw from softmax(logits / T) with the
    sequence's own seeded generator, so a run is reproducible."""
    tokens = logits.argmax(-1).tolist()
    for i, (temp, gen) in enumerate(zip(temperatures, generators, strict=True)):
        if temp > 0:
            probs = torch.softmax(logits[i] / temp, dim=-1)
            tokens[i] = int(torch.multinomial(probs, 1, generator=gen))
    return tokens


@torch.inference_mode()
def profile_forward(model: Decoder, pool: KVPool, num_tokens: int, num_logit_rows: int,
                    max_model_len: int | None = None, states: StatePool | None = None) -> None:
    """The two widest steps the engine can schedule, each with its logits and sampling: a
    prefill chunk of num_tokens (the token budget) continuing a prompt, so attention takes the
    paged path over at least two key groups; and a decode of num_logit_rows sequences, each
    two key groups long (both capped at max_model_len: no sequence reads more keys). K/V go
    only to the null block. Run it once to measure the runtime's transient peak
    (ledger/runtime_estimate.py states it term by term)."""
    heads = model.spec.attention.num_heads // model.tp.size
    bsz = pool.block_size_tokens
    seqs = min(num_logit_rows, num_tokens)
    cap = max_model_len or 1 << 62
    chunk_context = max(num_tokens + bsz,
                        min(cap, num_tokens + 2 * group_tokens(num_tokens, heads, bsz)))
    _profile_step(model, pool, [(chunk_context, num_tokens)], seqs, states)
    decode_context = min(cap, 2 * group_tokens(seqs, heads, bsz))
    _profile_step(model, pool, [(decode_context, 1)] * seqs, seqs, states)
    pool.tensor[:, :, :, pool.null_block].zero_()
    if states is not None:
        states.conv[:, states.null_slot].zero_()
        states.recurrent[:, states.null_slot].zero_()


def _profile_step(model: Decoder, pool: KVPool, rows: list[tuple[int, int]],
                  num_logit_rows: int, states: StatePool | None = None) -> None:
    """rows: (context, new tokens) per sequence, all one-token rows or one chunk; every block
    is the null block, every state the null slot (a chunk continues its state)."""
    bsz, device = pool.block_size_tokens, model.device
    total = sum(n for _, n in rows)
    slots = pool.null_block * bsz + torch.arange(total, device=device) % bsz
    positions = torch.cat([torch.arange(c - n, c, device=device) for c, n in rows])
    width = -(-max(c for c, _ in rows) // bsz)
    tables = torch.full((len(rows), width), pool.null_block, device=device)
    lens = torch.tensor([c for c, _ in rows], device=device)
    if rows[0][1] == 1:
        batch = PagedBatch(slots, len(rows), tables, lens, [])
    else:
        batch = PagedBatch(slots, 0, tables[:0], lens[:0],
                           [PrefillSpan(0, total, rows[0][0], tables[0])])
    batch.seq_lens = torch.repeat_interleave(lens, torch.tensor([n for _, n in rows],
                                                            device=device))
    if states is not None:
        null = states.null_slot
        batch.states = StateStep(states, torch.full((batch.num_decode,), null, device=device),
                                 [StateSpan(slice(0, total), null, False)]
                                 if not batch.num_decode else [])
    ids = torch.zeros(total, dtype=torch.long, device=device)
    hidden = model(ids, positions, PagedKV(pool, batch), batch.seq_lens)
    last = torch.arange(total - num_logit_rows, total, device=device)
    logits = model.logits(hidden[last])
    del hidden
    sample(logits, [1.0] + [0.0] * (num_logit_rows - 1), [None] * num_logit_rows)
