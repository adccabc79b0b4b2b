"""Paged attention: K/V read through block tables, a bounded group of blocks at a time; a whole
prompt through SDPA on its own K/V. The references it is checked against are in
attention_reference.py."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from servecap.ledger import runtime_estimate

from .kv_pool import FP8_KV, KVPool
from .softmax import PLAIN, Softmax


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
    # (T,) each token's sequence length after this step (RoPE types that depend on it)
    seq_lens: torch.Tensor | None = None
    states: object = None  # hybrids: the step's state layout (state_pool.StateStep)


def allowed(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    """Causal (and sliding-window) mask, broadcast over q_pos[..., None] and k_pos."""
    mask = k_pos <= q_pos
    if window is not None:
        mask &= k_pos > q_pos - window
    return mask




def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor | None,
                    block_tables: torch.Tensor, q_positions: torch.Tensor,
                    context_lens: torch.Tensor, window: int | None,
                    k_scale: float = 1.0, v_scale: float = 1.0,
                    workspace: "Workspace | None" = None,
                    softmax: Softmax = PLAIN) -> torch.Tensor:
    """q: (S, Q, H, D) at q_positions (S, Q); caches (Hkv, blocks, B, D); block_tables (S, nb)
    covering context_lens (S,). Returns (S, Q, H, D). A cache in another dtype (fp8) is read
    as cache x scale in q's dtype, one group at a time. v_cache None: the keys are the values
    too (MLA's latent, read once).

    Keys are read a group of blocks at a time (group_tokens), with an online softmax across
    groups, so the transient is a gather of S x group_tokens K/V slots and its fp32 scores:
    bounded by the step's shape, whatever the sequences' lengths."""
    num_seqs, num_q, heads, dim = q.shape
    hkv, _, block_size, _ = k_cache.shape
    group = heads // hkv
    qg = q.view(num_seqs, num_q, hkv, group, dim).permute(2, 0, 1, 3, 4)  # (Hkv, S, Q, G, D)
    qg = qg.reshape(hkv, num_seqs, num_q * group, dim)
    q_pos = q_positions.repeat_interleave(group, dim=1)[None, :, :, None]  # (1, S, QG, 1)
    step = runtime_estimate.group_tokens(num_seqs * num_q, heads, block_size) // block_size
    first = _first_block(q_positions, window, block_size)
    state, workspace = None, workspace or Workspace()
    scale = softmax.scale if softmax.scale is not None else dim ** -0.5
    for start in range(first, block_tables.shape[1], step):
        cols = block_tables[:, start:start + step].flatten()  # (S x g,)
        k_buf, v_buf = workspace.get(cols.numel(), k_cache, v_cache is not None)
        keys = _read(k_cache, cols, k_buf, k_scale, q.dtype).view(hkv, num_seqs, -1, dim)
        values = keys if v_cache is None else \
            _read(v_cache, cols, v_buf, v_scale, q.dtype).view(hkv, num_seqs, -1, dim)
        k_pos = torch.arange(start * block_size, start * block_size + keys.shape[2],
                             device=q.device)
        mask = allowed(q_pos, k_pos, window) & (k_pos < context_lens[None, :, None, None])
        state = _online_softmax(state, qg, keys, values, mask, scale)
        del keys, values, mask  # a cast group is freed before the next one is read
    acc, peak, total = state
    if softmax.sinks is not None:  # each head's sink joins the denominator: exp(sink - max)
        sinks = softmax.sinks.float().view(hkv, 1, 1, group).expand(hkv, 1, num_q, group)
        total += (sinks.reshape(hkv, 1, num_q * group) - peak).exp_()
    out = acc.div_(total[..., None]).to(q.dtype)  # (Hkv, S, QG, D)
    del acc, state
    return out.view(hkv, num_seqs, num_q, group, dim).permute(1, 2, 0, 3, 4).reshape(q.shape)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """fp8 tensors as uint8: CPU indexing kernels do not take fp8, and a copy is a copy."""
    return t.view(torch.uint8) if t.dtype == FP8_KV else t


def _store(cache: torch.Tensor, slots: torch.Tensor, new: torch.Tensor) -> None:
    """cache (Hkv, slots, D)[:, slots] = new (Hkv, T, D), in place."""
    _bytes(cache).index_copy_(1, slots, _bytes(new))


class Workspace:
    """Two flat buffers the grouped passes of one attention call gather into, allocated at
    the first (widest) group's size and reused by the rest; freed when the call returns, so
    they never sit beside the MLP's intermediates."""

    def __init__(self) -> None:
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def get(self, num_blocks: int, cache: torch.Tensor, values: bool = True
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Two contiguous (Hkv, num_blocks, B, D) views shaped like `cache`'s blocks (one when
        the keys are the values)."""
        shape = (cache.shape[0], num_blocks, *cache.shape[2:])
        size = shape[0] * num_blocks * shape[2] * shape[3]
        if self.buffers is None or self.buffers[0].numel() < size:
            self.buffers = (cache.new_empty(size), cache.new_empty(size) if values else None)
        k_buf, v_buf = self.buffers
        return k_buf[:size].view(shape), None if v_buf is None else v_buf[:size].view(shape)


def _read(cache: torch.Tensor, cols: torch.Tensor, out: torch.Tensor, scale: float,
          dtype: torch.dtype) -> torch.Tensor:
    """(Hkv, S*g, B, D): the group's blocks gathered into `out`, in the compute dtype."""
    hkv, num_blocks = cache.shape[:2]
    rows = (torch.arange(0, hkv * num_blocks, num_blocks, device=cols.device)[:, None]
            + cols).flatten()  # one row per (head, block): a contiguous B x D copy each
    flat = _bytes(cache).view(hkv * num_blocks, -1)
    torch.index_select(flat, 0, rows, out=_bytes(out).view(rows.numel(), -1))
    blocks = out
    if blocks.dtype == dtype:
        return blocks
    blocks = blocks.to(dtype)
    return blocks if scale == 1.0 else blocks * scale


def _first_block(q_positions: torch.Tensor, window: int | None, block_size: int) -> int:
    """Blocks wholly before every query's window are never read (they may be freed)."""
    if window is None:
        return 0
    return max(0, int(q_positions.min()) - window + 1) // block_size


def _online_softmax(state, qg: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                    mask: torch.Tensor, scale: float):
    """Fold one group of keys into (acc, running max, running sum): softmax over all groups
    equals softmax over the concatenated keys (the FlashAttention recurrence). In place where
    it can be: one fp32 score tensor and two fp32 accumulators live at most."""
    scores = (qg @ keys.transpose(-1, -2)).float() * scale  # (Hkv, S, QG, gB)
    scores = torch.where(mask, scores, float("-inf"))
    peak = scores.amax(-1)
    if state is not None:
        peak = torch.maximum(peak, state[1])
    safe = peak.masked_fill(peak == float("-inf"), 0.0)
    probs = scores.sub_(safe[..., None]).exp_()
    total = probs.sum(-1)
    acc = (probs.to(values.dtype) @ values).float()  # (Hkv, S, QG, D)
    del probs, scores
    if state is None:
        return acc, peak, total
    scale = (state[1] - safe).exp_()
    acc += state[0].mul_(scale[..., None])
    return acc, peak, total.add_(state[2].mul_(scale))


def prompt_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     window: int | None, scale: float | None = None) -> torch.Tensor:
    """A whole prompt attends to its own new K/V: q (Q, H, D), k/v (Q, Hkv, D) -> (Q, H, D).
    4-D inputs, so SDPA takes a fused kernel (FlashAttention on CPU and CUDA) instead of the
    math path's (H, Q, Q) scores; without a window no mask is built at all."""
    q4, k4, v4 = (t.transpose(0, 1)[None] for t in (q, k, v))  # (1, heads, Q, D)
    if window is None:
        out = F.scaled_dot_product_attention(q4, k4, v4, is_causal=True, enable_gqa=True,
                                             scale=scale)
    else:
        pos = torch.arange(q.shape[0], device=q.device)
        out = F.scaled_dot_product_attention(q4, k4, v4, enable_gqa=True, scale=scale,
                                             attn_mask=allowed(pos[:, None], pos[None], window))
    return out[0].transpose(0, 1)


class PagedKV:
    """The engine's KV backend: writes each layer's new K/V into the pool, then attends."""

    def __init__(self, pool: KVPool, batch: PagedBatch) -> None:
        self.pool, self.batch = pool, batch

    @property
    def states(self):
        """The step's state layout for linear-attention and Mamba layers (hybrids only)."""
        return self.batch.states

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None,
               window_tokens: int | None, softmax: Softmax = PLAIN) -> torch.Tensor:
        """q (T, H, D), k/v (T, Hkv, D) -> (T, H, D); v None: k is MLA's latent, cached once
        and read as both keys and values."""
        k_cache, v_cache = self.pool.layer(layer)
        batch = self.batch
        hkv, dim = k.shape[1:]
        for cache, new, which in ((k_cache, k, "k"), (v_cache, v, "v")):
            if cache is not None:
                _store(cache.view(hkv, -1, dim), batch.slot_mapping,
                       self.pool.to_cache(new.transpose(0, 1), which))
        scales = self.pool.k_scale, self.pool.v_scale
        parts = []
        if batch.num_decode:
            lens = batch.decode_context_lens
            parts.append(paged_attention(q[:batch.num_decode, None], k_cache, v_cache,
                                         batch.decode_block_tables, (lens - 1)[:, None], lens,
                                         window_tokens, *scales, softmax=softmax)[:, 0])
        for span in batch.prefills:
            rows = slice(span.token_start, span.token_start + span.num_tokens)
            parts.append(self._prefill(span, q[rows], k[rows], None if v is None else v[rows],
                                       (k_cache, v_cache), window_tokens, scales, softmax))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _prefill(self, span: PrefillSpan, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor | None, caches: tuple, window: int | None,
                 scales: tuple[float, float], softmax: Softmax) -> torch.Tensor:
        """A whole prompt reads its own K/V (as stored: a lower-precision cache is read back
        through it); a later chunk, or a prompt whose softmax has sinks (SDPA has none),
        reads its context from the pool."""
        k_cache, v_cache = caches
        if span.num_tokens == span.context_len and k_cache.dtype == q.dtype \
                and softmax.sinks is None:
            return prompt_attention(q, k, k if v is None else v, window, softmax.scale)
        positions = torch.arange(span.context_len - span.num_tokens, span.context_len,
                                 device=q.device)
        return paged_attention(q[None], k_cache, v_cache, span.block_table[None],
                               positions[None], torch.tensor([span.context_len],
                                                             device=q.device), window,
                               *scales, softmax=softmax)[0]
