"""Paged attention: K/V read through block tables for decode steps and prefill chunks.

Also the two references it is checked against: a naive fp32 softmax over a contiguous cache,
and DenseKV, a contiguous static-batch cache using the same decode math (the speed baseline).
"""

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .kv_pool import KVPool


@dataclass
class PrefillSpan:
    """num_tokens query rows from token_start; positions [context_len - num_tokens,
    context_len); block_table: (blocks,) covering context_len tokens."""

    token_start: int
    num_tokens: int
    context_len: int
    block_table: torch.Tensor


@dataclass
class PagedBatch:
    """One step's layout: the first num_decode rows are one-token decodes, then prefill spans.
    slot_mapping: (T,) flat slot (block x block_size + offset) each new token's K/V goes to."""

    slot_mapping: torch.Tensor
    num_decode: int
    decode_block_tables: torch.Tensor  # (S, max_blocks), padded with the null block
    decode_context_lens: torch.Tensor  # (S,)
    prefills: list[PrefillSpan]
    # (first block, context tokens) of each decode whose blocks are one contiguous run, else
    # None; only filled on the CPU, where reading such runs in place beats gathering them
    decode_runs: list[tuple[int, int] | None] = field(default_factory=list)
    # (T,) each token's sequence length after this step (RoPE types that depend on it)
    seq_lens: torch.Tensor | None = None


def allowed(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    """Causal (and sliding-window) mask, broadcast over q_pos[..., None] and k_pos."""
    mask = k_pos <= q_pos
    if window is not None:
        mask &= k_pos > q_pos - window
    return mask


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_tables: torch.Tensor, context_lens: torch.Tensor,
                 window: int | None, workspace: "Workspace | None" = None) -> torch.Tensor:
    """q: (S, H, D); caches: (Hkv, blocks, B, D); block_tables: (S, nb). Returns (S, H, D).
    Blocks are gathered into a workspace reused by every layer of the step, giving each
    (head, sequence) a contiguous (nb*B, D) matrix; then two batched matmuls and a softmax."""
    num_seqs, max_blocks = block_tables.shape
    hkv, _, block_size, dim = k_cache.shape
    group = q.shape[1] // hkv
    keys, values = (workspace or Workspace()).get(block_tables.numel(), k_cache)
    torch.index_select(k_cache, 1, block_tables.flatten(), out=keys)
    torch.index_select(v_cache, 1, block_tables.flatten(), out=values)
    length = max_blocks * block_size
    keys = keys.view(hkv, num_seqs, length, dim)  # (Hkv, S, nb*B, D)
    values = values.view(hkv, num_seqs, length, dim)
    k_pos = torch.arange(length, device=q.device)
    mask = allowed((context_lens - 1)[:, None], k_pos[None, :], window)  # (S, nb*B)
    mask &= k_pos[None, :] < context_lens[:, None]
    qg = q.view(num_seqs, hkv, group, dim).transpose(0, 1)  # (Hkv, S, G, D)
    out = grouped_attention(qg, keys, values, mask[None, :, None, :])  # (Hkv, S, G, D)
    return out.transpose(0, 1).reshape(num_seqs, hkv * group, dim)


def run_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, first_block: int,
               context_len: int, window: int | None) -> torch.Tensor:
    """One sequence whose blocks are consecutive in the pool: its K/V are a view, no gather.
    q: (H, D); returns (H, D)."""
    hkv, _, block_size, dim = k_cache.shape
    num_blocks = -(-context_len // block_size)
    keys = k_cache[:, first_block:first_block + num_blocks].reshape(hkv, -1, dim)  # a view
    values = v_cache[:, first_block:first_block + num_blocks].reshape(hkv, -1, dim)
    k_pos = torch.arange(num_blocks * block_size, device=q.device)
    mask = allowed(torch.tensor(context_len - 1, device=q.device), k_pos, window)
    mask &= k_pos < context_len
    return grouped_attention(q.view(hkv, -1, dim), keys, values, mask).view(q.shape)


def grouped_attention(qg: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with fp32 scores, for one query token per sequence: qg
    (..., G, D) holds the G query heads that share each KV head; keys/values (..., T, D); mask
    broadcasts to (..., G, T). Two batched matmuls that read each (T, D) matrix in place."""
    scores = (qg @ keys.transpose(-1, -2)).float() * qg.shape[-1] ** -0.5  # (..., G, T)
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return probs.to(values.dtype) @ values  # (..., G, D)


class Workspace:
    """Gather buffers for one step, grown on demand and shared by every layer."""

    def __init__(self) -> None:
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def get(self, num_blocks: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Two (Hkv, num_blocks, B, D) buffers shaped like the cache `like`."""
        if self.buffers is None or self.buffers[0].shape[1] < num_blocks:
            shape = (like.shape[0], num_blocks, *like.shape[2:])
            self.buffers = (like.new_empty(shape), like.new_empty(shape))
        return self.buffers[0][:, :num_blocks], self.buffers[1][:, :num_blocks]


def paged_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  block_table: torch.Tensor, context_len: int,
                  window: int | None) -> torch.Tensor:
    """One sequence's chunk: q (Q, H, D) at the last Q of context_len positions. (Q, H, D).
    A whole prompt without a window is plain causal attention: no mask tensor, so SDPA may
    pick a fused kernel (FlashAttention on CUDA) instead of materialising (H, Q, C) scores."""
    hkv, dim = k_cache.shape[0], k_cache.shape[3]
    keys = k_cache[:, block_table].view(hkv, -1, dim)[:, :context_len]  # (Hkv, C, D)
    values = v_cache[:, block_table].view(hkv, -1, dim)[:, :context_len]
    if window is None and q.shape[0] == context_len:
        return F.scaled_dot_product_attention(q.transpose(0, 1), keys, values, is_causal=True,
                                              enable_gqa=True).transpose(0, 1)
    q_pos = torch.arange(context_len - q.shape[0], context_len, device=q.device)
    mask = allowed(q_pos[:, None], torch.arange(context_len, device=q.device)[None, :], window)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), keys, values, attn_mask=mask,
                                         enable_gqa=True)  # (H, Q, D)
    return out.transpose(0, 1)


class PagedKV:
    """The engine's KV backend: writes each layer's new K/V into the pool, then attends."""

    def __init__(self, pool: KVPool, batch: PagedBatch) -> None:
        self.pool, self.batch = pool, batch
        self.workspace = Workspace()

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               window_tokens: int | None) -> torch.Tensor:
        k_cache, v_cache = self.pool.layer(layer)
        batch = self.batch
        hkv, dim = k.shape[1:]
        k_cache.view(hkv, -1, dim).index_copy_(1, batch.slot_mapping, k.transpose(0, 1))
        v_cache.view(hkv, -1, dim).index_copy_(1, batch.slot_mapping, v.transpose(0, 1))
        parts = []
        if batch.num_decode:
            parts.append(self._decode(q[:batch.num_decode], k_cache, v_cache, window_tokens))
        for span in batch.prefills:
            rows = q[span.token_start:span.token_start + span.num_tokens]
            parts.append(paged_prefill(rows, k_cache, v_cache, span.block_table,
                                       span.context_len, window_tokens))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                window: int | None) -> torch.Tensor:
        """Contiguous runs are read in place, the rest gathered in one batch."""
        batch, runs = self.batch, self.batch.decode_runs
        if not any(runs):
            return paged_decode(q, k_cache, v_cache, batch.decode_block_tables,
                                batch.decode_context_lens, window, self.workspace)
        out = torch.empty_like(q)
        rest = [i for i, run in enumerate(runs) if run is None]
        for i, run in enumerate(runs):
            if run is not None:
                out[i] = run_decode(q[i], k_cache, v_cache, run[0], run[1], window)
        if rest:
            index = torch.tensor(rest, device=q.device)
            out[index] = paged_decode(q[index], k_cache, v_cache,
                                      batch.decode_block_tables[index],
                                      batch.decode_context_lens[index], window, self.workspace)
        return out


def reference_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                        window: int | None = None) -> torch.Tensor:
    """Naive fp32 softmax(q k^T / sqrt(d)) v over a contiguous cache. q: (Q, H, D) at the last
    Q positions of keys/values (C, Hkv, D). Returns (Q, H, D)."""
    num_q, heads, dim = q.shape
    group = heads // keys.shape[1]
    k = keys.float().repeat_interleave(group, dim=1).transpose(0, 1)  # (H, C, D)
    v = values.float().repeat_interleave(group, dim=1).transpose(0, 1)
    scores = q.float().transpose(0, 1) @ k.transpose(1, 2) / dim ** 0.5  # (H, Q, C)
    context = keys.shape[0]
    q_pos = torch.arange(context - num_q, context, device=q.device)[:, None]
    mask = allowed(q_pos, torch.arange(context, device=q.device)[None, :], window)
    scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(0, 1).to(q.dtype)


class DenseKV:
    """Reference backend: each sequence owns a contiguous (Hkv, max_tokens, D) cache per layer,
    the layout of a static-batch cache. set_rows(rows) says whose tokens each run is."""

    def __init__(self, num_layers: int, num_seqs: int, max_tokens: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype, device: str | torch.device = "cpu") -> None:
        shape = (num_layers, num_seqs, num_kv_heads, max_tokens, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.rows: list[tuple[int, int, int]] = []

    def set_rows(self, rows: list[tuple[int, int, int]]) -> None:
        """rows: (sequence, first position, number of tokens), in batch order."""
        self.rows = rows

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               window_tokens: int | None) -> torch.Tensor:
        if all(n == 1 for _, _, n in self.rows) and \
                [s for s, _, _ in self.rows] == list(range(len(self.rows))):
            return self._decode(layer, q, k, v, window_tokens)
        out, row = [], 0
        for seq, start, n in self.rows:
            self.k[layer, seq, :, start:start + n] = k[row:row + n].transpose(0, 1)
            self.v[layer, seq, :, start:start + n] = v[row:row + n].transpose(0, 1)
            q_pos = torch.arange(start, start + n, device=q.device)[:, None]
            mask = allowed(q_pos, torch.arange(start + n, device=q.device)[None, :],
                           window_tokens)
            out.append(F.scaled_dot_product_attention(
                q[row:row + n].transpose(0, 1), self.k[layer, seq, :, :start + n],
                self.v[layer, seq, :, :start + n], attn_mask=mask, enable_gqa=True
            ).transpose(0, 1))
            row += n
        return torch.cat(out)

    def _decode(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                window: int | None) -> torch.Tensor:
        """Rows are sequences 0..S-1 in order (a static batch): the cache is read in place, with
        the same math as paged_decode, so the two differ only by the block gather."""
        num_seqs, hkv, dim = k.shape
        max_tokens = self.k.shape[3]
        pos = torch.tensor([p for _, p, _ in self.rows], device=q.device)
        rows = (torch.arange(num_seqs * hkv, device=q.device) * max_tokens).view(num_seqs, hkv)
        flat = (rows + pos[:, None]).flatten()  # row of (seq, head, pos) in a (-1, D) view
        self.k[layer].view(-1, dim).index_copy_(0, flat, k.reshape(-1, dim))
        self.v[layer].view(-1, dim).index_copy_(0, flat, v.reshape(-1, dim))
        length = int(pos.max()) + 1
        mask = allowed(pos[:, None], torch.arange(length, device=q.device)[None, :], window)
        qg = q.view(num_seqs, hkv, -1, dim)  # (S, Hkv, G, D)
        out = grouped_attention(qg, self.k[layer, :num_seqs, :, :length],
                                self.v[layer, :num_seqs, :, :length], mask[:, None, None, :])
        return out.reshape(num_seqs, -1, dim)  # (S, H, D)
