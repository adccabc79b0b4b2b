"""The runtime-peak terms of DeepSeek's latent attention (runtime/mla.py): one step of T query
rows, term by term; ledger/runtime_estimate.py takes the widest layer.

The runtime caches one latent per token (kv_lora_rank + qk_rope_head_dim) and attends with it
as the one shared key and value of every head, each query taken into the latent's space
(q_nope x W_UK) and the output out of it (x W_UV): so the attention itself is the paged or
prompt attention of runtime_estimate with one KV head of L + R dims, read once.
"""

from dataclasses import dataclass

from .model import ModelSpec

FP32 = 4


@dataclass(frozen=True)
class MLADims:
    """One rank's heads and the latent attention's widths."""

    heads: int
    q_lora: int  # 0: q_proj straight from the hidden state
    kv_lora: int
    rope: int
    nope: int
    v: int

    @property
    def latent(self) -> int:
        return self.kv_lora + self.rope


def mla_dims(spec: ModelSpec, tensor_parallel_size: int = 1) -> MLADims | None:
    att = spec.attention
    if att.kind != "mla":
        return None
    return MLADims(max(1, att.num_heads // tensor_parallel_size), att.q_lora_rank or 0,
                   att.kv_lora_rank, att.qk_rope_head_dim, att.qk_nope_head_dim, att.v_head_dim)


def mla_peak(m: MLADims, tokens: int, hidden: int, act: int, attend: int) -> int:
    """The widest phase of one latent-attention layer beyond the residual stream, `attend`
    being the attention's own transient (the prompt kernel's or the paged pass's):
    held      the normed input (T x H)
    q         the q latent and its RMSNorm's fp32 square and product (T x q_lora x 3), then q
              (T x heads x (nope + rope))
    latent    q, the latent (T x (L + R)) and its RMSNorm's two fp32 (T x L)
    query     q, the latent, the latent-space query (T x heads x (L + R)), the absorbed
              product before it is written in (T x heads x L) and RoPE's three (T x heads x R)
    attend    the latent and the query beside the attention's transient
    output    the attention's output (T x heads x (L + R)), its value projection (heads x T x
              v), that made row-major, and o_proj's (T x H)."""
    t, b, h = tokens, act, m.heads
    cast = FP32 if act != FP32 else 0
    q = t * h * (m.nope + m.rope) * b
    latent, query = t * m.latent * b, t * h * m.latent * b
    phases = (
        t * m.q_lora * (b + 2 * FP32 + cast) + q if m.q_lora else q,
        q + latent + 2 * t * m.kv_lora * (FP32 + cast),
        q + latent + query + t * h * m.kv_lora * b + 3 * t * h * m.rope * b,
        latent + query + attend,
        query + 2 * t * h * m.v * b + t * hidden * b,
    )
    return t * hidden * b + max(phases)
