"""The references paged attention is checked against: a naive fp32 softmax over a contiguous
cache, and DenseKV, a contiguous static-batch cache using the same decode math (the speed
baseline of bench/runtime_decode.py)."""

import torch
import torch.nn.functional as F

from .attention import allowed
from .softmax import PLAIN, Softmax


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


def grouped_attention(qg: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with fp32 scores over a contiguous cache read in place: qg
    (..., G, D) holds the G query heads sharing each KV head; keys/values (..., T, D)."""
    scores = (qg @ keys.transpose(-1, -2)).float() * qg.shape[-1] ** -0.5  # (..., G, T)
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return probs.to(values.dtype) @ values  # (..., G, D)


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

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None,
               window_tokens: int | None, softmax: Softmax = PLAIN) -> torch.Tensor:
        if v is None or softmax.sinks is not None or softmax.scale is not None:
            raise ValueError("DenseKV is the dense models' reference: no MLA latent, no "
                             "sinks, no scale of its own")
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
