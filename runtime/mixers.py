"""State-layer token mixers: Nemotron-H's Mamba-2 mixer and Qwen3-Next's gated DeltaNet.

Module and parameter names follow the Hugging Face checkpoints (mixer.in_proj, conv1d, dt_bias,
A_log, D, norm, out_proj; linear_attn.in_proj_qkvz, in_proj_ba, ...), so a local safetensors
directory loads with a strict state dict. Each step's rows are one-token decodes first (their
states gathered from the pool by slot, stepped together, written back), then prefill chunks,
each continuing its slot's state (or starting from zeros) through the chunked scan.
"""

import torch
import torch.nn.functional as F
from torch import nn

from servecap.ledger.model import ModelSpec
from servecap.ledger.runtime_estimate import state_group_rows

from .recurrences import (
    causal_conv,
    conv_step,
    delta_rule_chunked,
    delta_rule_step,
    ssd_scan,
    ssd_step,
)
from .state_pool import StateStep


class GatedGroupNorm(nn.Module):
    """Mamba-2's gated RMSNorm: x * silu(gate), normalised over groups of the channels, in fp32;
    the weight multiplies the result in the input dtype (NemotronHRMSNormGated)."""

    unit_weight = 1.0

    def __init__(self, size: int, group_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.group_size, self.eps = group_size, eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        h = x.float() * F.silu(gate.float())
        groups = h.view(*h.shape[:-1], -1, self.group_size)
        groups = groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * groups.view(h.shape).to(dtype)


class GatedRMSNorm(nn.Module):
    """Gated DeltaNet's output norm: RMSNorm (weight in the input dtype), then x silu(gate)
    (Qwen3NextRMSNormGated, norm before gate)."""

    unit_weight = 1.0

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.float()
        h = self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype)
        return (h * F.silu(gate.float())).to(dtype)


def _conv_groups(module: nn.Conv1d, xbc: torch.Tensor, states: StateStep, layer: int,
                 state_elements: int):
    """Row groups with their short causal conv + SiLU done, conv states read and written in
    the pool, one at a time: (rows, conv output, slot(s), fresh). Decodes first, in groups of
    state_group_rows sequences (a tensor of slots), then each prefill chunk (one slot)."""
    conv_pages, _ = states.pool.layer(layer)
    weight, bias = module.weight[:, 0, :], module.bias
    group = state_group_rows(state_elements)
    for start in range(0, states.num_decode, group):
        rows = slice(start, min(states.num_decode, start + group))
        slots = states.decode_slots[rows]
        y, new = conv_step(xbc[rows], conv_pages.index_select(0, slots), weight, bias)
        conv_pages.index_copy_(0, slots, new.to(conv_pages.dtype))
        del new
        yield rows, F.silu(y), slots, False
    for span in states.spans:
        y, new = causal_conv(xbc[span.rows], None if span.fresh else conv_pages[span.slot],
                             weight, bias)
        conv_pages[span.slot] = new.to(conv_pages.dtype)
        del new
        yield span.rows, F.silu(y), span.slot, span.fresh


class Mamba2Mixer(nn.Module):
    """in_proj -> (gate, x B C, dt); causal conv + SiLU over x B C; the selective state space;
    gated group RMSNorm; out_proj (NemotronHMamba2Mixer)."""

    def __init__(self, spec: ModelSpec, layer: int, eps: float, time_step_min: float) -> None:
        super().__init__()
        st, h = spec.state, spec.hidden_size
        self.layer, self.heads = layer, st.recurrent_heads
        self.head_dim, self.d_state = st.recurrent_shape
        self.groups, self.inner, self.conv_dim = st.n_groups, st.intermediate, st.conv_dim
        self.time_step_min = time_step_min
        self.in_proj = nn.Linear(h, self.inner + self.conv_dim + self.heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, st.conv_kernel,
                                groups=self.conv_dim, bias=True)
        self.dt_bias = nn.Parameter(torch.empty(self.heads))
        self.A_log = nn.Parameter(torch.empty(self.heads))
        self.D = nn.Parameter(torch.empty(self.heads))
        self.norm = GatedGroupNorm(self.inner, self.inner // self.groups, eps)
        self.out_proj = nn.Linear(self.inner, h, bias=False)

    def forward(self, x: torch.Tensor, states: StateStep) -> torch.Tensor:
        gate, xbc, dt = self.in_proj(x).split([self.inner, self.conv_dim, self.heads], dim=-1)
        _, pages = states.pool.layer(self.layer)
        a = -torch.exp(self.A_log.float())
        y = x.new_empty(x.shape[0], self.inner, dtype=torch.float32)
        groups = self.groups * self.d_state
        for rows, conv, slot, fresh in _conv_groups(self.conv1d, xbc, states, self.layer,
                                                    pages[0].numel()):
            n = conv.shape[0]
            xs, b, c = conv.split([self.inner, groups, groups], dim=-1)
            xs = xs.reshape(n, self.heads, self.head_dim)
            b, c = (t.reshape(n, self.groups, self.d_state) for t in (b, c))
            step = F.softplus(dt[rows] + self.dt_bias)
            if isinstance(slot, torch.Tensor):  # decodes: one step each, states by slot
                out, new = ssd_step(xs, step, a, b, c, self.D, pages.index_select(0, slot).float())
                pages.index_copy_(0, slot, new.to(pages.dtype))
            else:
                _, new = ssd_scan(xs, step.clamp(min=self.time_step_min), a, b, c, self.D,
                                  None if fresh else pages[slot],
                                  out=y[rows].view(n, self.heads, self.head_dim))
                pages[slot] = new.to(pages.dtype)
                del new
                continue
            y[rows] = out.reshape(n, -1)
            del out, new  # the group's states go before the next group's are gathered
        return self.out_proj(self.norm(y, gate, x.dtype))


class GatedDeltaNet(nn.Module):
    """in_proj_qkvz / in_proj_ba (grouped per key head); causal conv + SiLU over q k v; the gated
    delta rule with L2-normalised q and k; gated RMSNorm; out_proj (Qwen3NextGatedDeltaNet)."""

    def __init__(self, spec: ModelSpec, layer: int, eps: float) -> None:
        super().__init__()
        st, h = spec.state, spec.hidden_size
        self.layer = layer
        self.v_heads, (self.v_dim, self.k_dim) = st.recurrent_heads, st.recurrent_shape
        self.k_heads = (st.conv_dim - self.v_heads * self.v_dim) // (2 * self.k_dim)
        self.key_size, self.value_size = self.k_heads * self.k_dim, self.v_heads * self.v_dim
        self.conv_dim = st.conv_dim
        self.in_proj_qkvz = nn.Linear(h, 2 * self.key_size + 2 * self.value_size, bias=False)
        self.in_proj_ba = nn.Linear(h, 2 * self.v_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, st.conv_kernel,
                                groups=self.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(self.v_heads))
        self.A_log = nn.Parameter(torch.empty(self.v_heads))
        self.norm = GatedRMSNorm(self.v_dim, eps)
        self.out_proj = nn.Linear(self.value_size, h, bias=False)

    def _split(self, x: torch.Tensor):
        """q, k (T, Hk dk), v, z (T, Hv dv), b, a (T, Hv), from the per-key-head grouping."""
        t, ratio = x.shape[0], self.v_heads // self.k_heads
        qkvz = self.in_proj_qkvz(x).view(t, self.k_heads, -1)
        q, k, v, z = qkvz.split([self.k_dim, self.k_dim, ratio * self.v_dim,
                                 ratio * self.v_dim], dim=-1)
        b, a = self.in_proj_ba(x).view(t, self.k_heads, -1).split([ratio, ratio], dim=-1)
        return (q.reshape(t, -1), k.reshape(t, -1), v.reshape(t, -1), z.reshape(t, -1),
                b.reshape(t, -1), a.reshape(t, -1))

    def forward(self, x: torch.Tensor, states: StateStep) -> torch.Tensor:
        q, k, v, z, b, a = self._split(x)
        mixed = torch.cat((q, k, v), dim=-1)
        del q, k, v
        _, pages = states.pool.layer(self.layer)
        beta = b.sigmoid()
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        core = x.new_empty(x.shape[0], self.v_heads, self.v_dim)
        for rows, conv, slot, fresh in _conv_groups(self.conv1d, mixed, states, self.layer,
                                                    pages[0].numel()):
            n = conv.shape[0]
            qs, ks, vs = conv.split([self.key_size, self.key_size, self.value_size], dim=-1)
            qs, ks = (t.reshape(n, self.k_heads, self.k_dim) for t in (qs, ks))
            vs = vs.reshape(n, self.v_heads, self.v_dim)
            if isinstance(slot, torch.Tensor):
                out, new = delta_rule_step(qs, ks, vs, g[rows], beta[rows],
                                           pages.index_select(0, slot).float())
                pages.index_copy_(0, slot, new.to(pages.dtype))
            else:
                _, new = delta_rule_chunked(qs, ks, vs, g[rows], beta[rows],
                                            None if fresh else pages[slot], out=core[rows])
                pages[slot] = new.to(pages.dtype)
                del new
                continue
            core[rows] = out.to(core.dtype)
            del out, new  # the group's states go before the next group's are gathered
        out = self.norm(core.view(-1, self.v_dim), z.reshape(-1, self.v_dim))
        return self.out_proj(out.view(x.shape[0], -1))
