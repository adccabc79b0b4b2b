"""DeepSeek-V2/V3's multi-head latent attention, run as vLLM runs it: the KV pool caches one
latent per token (kv_lora_rank normalised dims + qk_rope_head_dim rotated dims), and attention
reads it as one shared key and value with kv_b_proj's key half folded into each query head and
its value half applied to the output (the weight absorption of vLLM's MLA backends).

Parameter names follow the checkpoints (q_a_proj, q_a_layernorm, q_b_proj or q_proj,
kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj). Softmax scale: 1 / sqrt(qk_nope +
qk_rope) x mscale^2 under yarn with mscale_all_dim (transformers' yarn_apply_mscale, vLLM's
DeepseekV2MLAAttention). RoPE: DeepSeek rotates interleaved pairs (x0, x1), (x2, x3), ...
(rope_interleave, transformers' default; vLLM's is_neox_style=False): taking the even dims then
the odd ones turns that into the rotate-half form, and q and k share the order, so their
products are unchanged.
"""

import math

import torch
from torch import nn

from servecap.ledger.model import ModelSpec

from .parallel import TensorParallel, all_reduce
from .rope import Rope, apply_rope
from .softmax import Softmax


def mla_scale(spec: ModelSpec, rope: Rope) -> float:
    """qk_head^-1/2, x (0.1 x mscale_all_dim x ln(factor) + 1)^2 under a scaled RoPE."""
    att = spec.attention
    scale = (att.qk_nope_head_dim + att.qk_rope_head_dim) ** -0.5
    mscale_all = rope.params.get("mscale_all_dim")
    factor = rope.params.get("factor") or 1.0
    if rope.rope_type != "default" and mscale_all and factor > 1:
        scale *= (0.1 * mscale_all * math.log(factor) + 1.0) ** 2
    return scale


class LatentAttention(nn.Module):
    """This rank's heads of q_b_proj, kv_b_proj and o_proj; the latent is every rank's."""

    def __init__(self, spec: ModelSpec, layer: int, opts, tp: TensorParallel, norm) -> None:
        super().__init__()
        att, h = spec.attention, spec.hidden_size
        self.layer, self.tp = layer, tp
        self.num_heads = att.num_heads // tp.size
        self.nope, self.rope_dims, self.v_dim = att.qk_nope_head_dim, att.qk_rope_head_dim, \
            att.v_head_dim
        self.kv_lora = att.kv_lora_rank
        qk_head = self.nope + self.rope_dims
        if att.q_lora_rank:
            self.q_a_proj = nn.Linear(h, att.q_lora_rank, bias=False)
            self.q_a_layernorm = norm(att.q_lora_rank, opts.rms_norm_eps)
            self.q_b_proj = nn.Linear(att.q_lora_rank, self.num_heads * qk_head, bias=False)
        else:
            self.q_proj = nn.Linear(h, self.num_heads * qk_head, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, self.kv_lora + self.rope_dims, bias=False)
        self.kv_a_layernorm = norm(self.kv_lora, opts.rms_norm_eps)
        self.kv_b_proj = nn.Linear(self.kv_lora, self.num_heads * (self.nope + self.v_dim),
                                   bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.v_dim, h, bias=False)
        self.softmax = Softmax(scale=mla_scale(spec, opts.rope))
        self.interleaved = opts.rope_interleave

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor], kv
                ) -> torch.Tensor:
        tokens = x.shape[0]
        q = (self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))) if hasattr(self, "q_a_proj")
             else self.q_proj(x)).view(tokens, self.num_heads, -1)  # (T, H, nope + rope)
        latent = self.kv_a_proj_with_mqa(x)  # (T, kv_lora + rope)
        latent[:, :self.kv_lora] = self.kv_a_layernorm(latent[:, :self.kv_lora])
        latent = latent.view(tokens, 1, -1)
        latent[..., self.kv_lora:] = self._rotate(latent[..., self.kv_lora:], rotary)
        w_k, w_v = self._absorbed()
        # queries in the latent's space: q_nope W_UK per head, then the rotated dims
        query = torch.empty(tokens, self.num_heads, self.kv_lora + self.rope_dims,
                            dtype=x.dtype, device=x.device)
        torch.bmm(q[..., :self.nope].transpose(0, 1), w_k,
                  out=query[..., :self.kv_lora].transpose(0, 1))
        query[..., self.kv_lora:] = self._rotate(q[..., self.nope:], rotary)
        del q
        out = kv.attend(self.layer, query, latent, None, None, self.softmax)  # (T, H, L + R)
        del query
        values = torch.bmm(out[..., :self.kv_lora].transpose(0, 1), w_v)  # (H, T, v)
        del out
        return all_reduce(self.o_proj(values.transpose(0, 1).reshape(tokens, -1)), self.tp)

    def _absorbed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """kv_b_proj's halves per head: W_UK (H, nope, L) and W_UV^T (H, L, v), views."""
        w = self.kv_b_proj.weight.view(self.num_heads, self.nope + self.v_dim, self.kv_lora)
        return w[:, :self.nope], w[:, self.nope:].transpose(1, 2)

    def _rotate(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor]
                ) -> torch.Tensor:
        """RoPE over (T, heads, rope) dims, interleaved pairs taken even-then-odd first."""
        if self.interleaved:
            x = torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
        return apply_rope(x, *rotary)
