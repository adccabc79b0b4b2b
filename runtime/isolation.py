"""A step's per-request work with each request's failure kept to itself: a forward pass that
raises is retried one chunk at a time, and each row is sampled on its own, so the request
whose work raises fails and every other request in the batch goes on.

Retrying a chunk alone is exact: a chunk writes K/V only into its own (copy-on-write) blocks
and attends only to its own blocks, so its result does not depend on the batch around it.
Rewriting K/V is idempotent, a recurrent state update is not: a hybrid's state slots are
copied before the batched pass and put back before the retries.
"""

import torch

from .block_manager import BlockManager
from .kv_pool import KVPool
from .model import Decoder
from .runner import forward_step
from .sequence import Sequence
from .state_pool import StatePool


class SamplingError(RuntimeError):
    """A row whose sampling cannot give a token (non-finite probabilities, a bad seed)."""


def forward_isolated(model: Decoder, pool: KVPool, blocks: BlockManager,
                     chunks: list[tuple[Sequence, int]], states: StatePool | None = None
                     ) -> tuple[torch.Tensor, list[Sequence], dict[int, str]]:
    """forward_step's (logits, ready) and {seq_id: reason} for the chunks whose own forward
    pass raised (those are in neither logits nor ready)."""
    saved = _save_states(states, chunks) if len(chunks) > 1 else None
    try:
        logits, ready = forward_step(model, pool, blocks, chunks, states)
        return logits, ready, {}
    except Exception as exc:
        if len(chunks) == 1:
            return _no_rows(model), [], {chunks[0][0].seq_id: _reason("forward pass", exc)}
    _restore_states(states, saved)
    parts, ready, failed = [], [], {}
    for chunk in chunks:
        saved = _save_states(states, [chunk])
        try:
            logits, alone = forward_step(model, pool, blocks, [chunk], states)
        except Exception as exc:
            _restore_states(states, saved)
            failed[chunk[0].seq_id] = _reason("forward pass", exc)
            continue
        parts.append(logits)
        ready += alone
    return (torch.cat(parts) if parts else _no_rows(model)), ready, failed


def sample_isolated(logits: torch.Tensor, seqs: list[Sequence], generator_for
                    ) -> tuple[list[tuple[Sequence, int]], dict[int, str]]:
    """One token per row: argmax at temperature 0, else a draw from softmax(logits / T) with
    the sequence's seeded generator (generator_for(seq)); a row that cannot be sampled is a
    {seq_id: reason} instead of a token."""
    greedy = logits.argmax(-1).tolist() if len(seqs) else []
    tokens, failed = [], {}
    for i, seq in enumerate(seqs):
        if seq.temperature == 0:
            tokens.append((seq, greedy[i]))
            continue
        try:
            tokens.append((seq, sample_row(logits[i], seq.temperature, generator_for(seq))))
        except Exception as exc:
            failed[seq.seq_id] = _reason("sampling", exc)
    return tokens, failed


def sample_row(row: torch.Tensor, temperature: float, generator) -> int:
    """A draw from softmax(row / T); refused before torch.multinomial when the probabilities
    are not finite (on CUDA multinomial would assert and poison the device for everyone)."""
    probs = torch.softmax(row.float() / temperature, dim=-1)
    if not bool(torch.isfinite(probs).all()):
        raise SamplingError(f"softmax(logits / {temperature!r}) is not finite")
    return int(torch.multinomial(probs, 1, generator=generator))


def _save_states(states: StatePool | None, chunks: list[tuple[Sequence, int]]):
    """(slots, conv copy, recurrent copy) of the chunks' state slots; None without states."""
    if states is None:
        return None
    slots = torch.tensor([seq.state_slot for seq, _ in chunks], device=states.conv.device)
    return slots, states.conv[:, slots].clone(), states.recurrent[:, slots].clone()


def _restore_states(states: StatePool | None, saved) -> None:
    if states is not None and saved is not None:
        slots, conv, recurrent = saved
        states.conv[:, slots] = conv
        states.recurrent[:, slots] = recurrent


def _no_rows(model: Decoder) -> torch.Tensor:
    return torch.zeros(0, model.spec.vocab_size, dtype=torch.float32, device=model.device)


def _reason(stage: str, exc: Exception) -> str:
    return f"{stage} failed for this request: {type(exc).__name__}: {str(exc)[:160]}"
