"""The recurrences of hybrid models' state layers in plain PyTorch: the short causal convolution
both families put before their scan, Mamba-2's selective state space (the chunked SSD form for
prefill, one step for decode) and the gated delta rule (chunked and one step).

Each prefill function takes one sequence's chunk and the state it starts from (None: a fresh
sequence, zeros) and returns the chunk's outputs and the state after it, so a prompt computed
in any chunks gives the same result as in one. The math and the order of its operations follow
transformers' reference implementations (models/mamba2 ssd chunk scan, models/qwen3_next
torch_chunk_gated_delta_rule), which the runtime is tested against; the scans run in fp32.
States are laid out as vLLM keeps them (ledger/state.py): conv (kernel - 1, conv_dim), Mamba-2
(heads, head_dim, d_state), gated DeltaNet (v heads, v dim, k dim).
"""

import torch
import torch.nn.functional as F

from servecap.ledger.runtime_estimate import STATE_SCAN_CHUNK_TOKENS


def causal_conv(x: torch.Tensor, state: torch.Tensor | None, weight: torch.Tensor,
                bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal conv of one chunk x (n, C) after the kernel - 1 inputs before it (state
    (k - 1, C); None: zeros). Returns (n, C) outputs and the new state, the last k - 1 inputs."""
    kernel = weight.shape[-1]
    before = state.to(x.dtype) if state is not None else x.new_zeros(kernel - 1, x.shape[1])
    full = torch.cat((before, x))  # (k - 1 + n, C)
    out = F.conv1d(full.T[None], weight[:, None, :], bias, groups=x.shape[1])[0].T
    return out, full[-(kernel - 1):]


def conv_step(x: torch.Tensor, states: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per sequence: x (S, C), states (S, k - 1, C) -> (S, C) and the new states."""
    full = torch.cat((states.to(x.dtype), x[:, None]), dim=1)  # (S, k, C)
    out = torch.einsum("skc,ck->sc", full, weight)
    if bias is not None:
        out += bias
    return out, full[:, 1:]


# -- Mamba-2 ---------------------------------------------------------------------------------
def _segment_sum(x: torch.Tensor) -> torch.Tensor:
    """(..., L) -> (..., L, L): entry [i, j] = Σ x[j+1..i] on and below the diagonal, -inf
    above (the cumulative sum of masked copies, as transformers' segment_sum: stable)."""
    size = x.shape[-1]
    x = x[..., None].expand(*x.shape, size)
    below = torch.tril(torch.ones(size, size, dtype=torch.bool, device=x.device), diagonal=-1)
    sums = torch.cumsum(x.masked_fill(~below, 0), dim=-2)
    keep = torch.tril(torch.ones(size, size, dtype=torch.bool, device=x.device), diagonal=0)
    return sums.masked_fill_(~keep, float("-inf"))


def ssd_scan(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
             c: torch.Tensor, d: torch.Tensor, state: torch.Tensor | None,
             chunk: int = STATE_SCAN_CHUNK_TOKENS, out: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's state space over one sequence's n tokens, `chunk` tokens at a time (the SSD
    form: within a chunk as masked attention, across chunks through the state). x (n, H, P);
    dt (n, H) already softplus'd and clamped; a (H,) < 0; b, c (n, G, N); d (H,); state
    (H, P, N) or None. Returns y (n, H, P) fp32 (written into `out` when given) and the final
    state fp32."""
    n, heads, dim = x.shape
    s = state.float() if state is not None else x.new_zeros(heads, dim, b.shape[-1],
                                                             dtype=torch.float32)
    y = out if out is not None else x.new_empty(n, heads, dim, dtype=torch.float32)
    for start in range(0, n, chunk):
        rows = slice(start, min(n, start + chunk))
        y[rows], s = _ssd_chunk(x[rows], dt[rows], a, b[rows], c[rows], d, s)
    return y, s


def _ssd_chunk(x, dt, a, b, c, d, s):
    """One chunk of l tokens from state s (H, P, N), heads first: (y (l, H, P), the new state).
    Within the chunk y = (C B^T o exp(segment sums)) (x dt) + exp(cum) C s^T + D x; the state
    decays by the chunk's total and takes each token's (x dt) B^T, decayed to the chunk end."""
    rep = x.shape[1] // b.shape[1]
    dt = dt.float().T  # (H, l)
    bh = b.float().transpose(0, 1).repeat_interleave(rep, dim=0)  # (H, l, N)
    ch = c.float().transpose(0, 1).repeat_interleave(rep, dim=0)
    xdt = (x.float() * dt.T[..., None]).transpose(0, 1).contiguous()  # (H, l, P)
    cum = torch.cumsum(a.float()[:, None] * dt, dim=-1)  # (H, l)
    scores = torch.bmm(ch, bh.transpose(1, 2))  # (H, l, l)
    scores.mul_(torch.exp(_segment_sum(a.float()[:, None] * dt)))
    y = torch.bmm(scores, xdt)  # (H, l, P)
    del scores
    y.baddbmm_(ch.mul_(torch.exp(cum)[..., None]), s.transpose(1, 2))
    y.addcmul_(x.float().transpose(0, 1), d.float()[:, None, None])
    new = s * torch.exp(cum[:, -1])[:, None, None]
    new.baddbmm_(xdt.transpose(1, 2), bh.mul_(torch.exp(cum[:, -1:] - cum)[..., None]))
    return y.transpose(0, 1), new


def ssd_step(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
             c: torch.Tensor, d: torch.Tensor,
             states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per sequence: x (S, H, P), dt (S, H) already softplus'd, b, c (S, G, N),
    states (S, H, P, N) fp32, updated in place. Returns y (S, H, P) fp32 and the states."""
    rep = x.shape[1] // b.shape[1]
    dt = dt.float()[..., None]  # (S, H, 1)
    states.mul_(torch.exp(dt * a.float()[:, None])[..., None])
    b = b.float().repeat_interleave(rep, dim=1)[:, :, None, :]  # (S, H, 1, N)
    states += (dt[..., None] * b) * x.float()[..., None]
    c = c.float().repeat_interleave(rep, dim=1)
    return torch.einsum("shpn,shn->shp", states, c) + x.float() * d.float()[:, None], states


# -- gated delta rule (gated DeltaNet) ----------------------------------------------------------
def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _heads_first(q, k, v, g, beta):
    """fp32, heads first, q and k L2-normalised and repeated to the value heads, q scaled."""
    rep = v.shape[1] // k.shape[1]
    q, k = (t.float().transpose(0, 1).repeat_interleave(rep, dim=0) for t in (q, k))
    q, k = l2norm(q), l2norm(k)
    v = v.float().transpose(0, 1).contiguous()
    return q.mul_(q.shape[-1] ** -0.5), k, v, g.float().T, beta.float().T


def delta_rule_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                       beta: torch.Tensor, state: torch.Tensor | None,
                       chunk: int = STATE_SCAN_CHUNK_TOKENS, out: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule over one sequence's n tokens, `chunk` tokens at a time (the UT
    form within a chunk, the state across). q, k (n, Hk, Dk); v (n, Hv, Dv); g, beta (n, Hv);
    state (Hv, Dv, Dk) or None. Returns the output (n, Hv, Dv) (written into `out` when given,
    else fp32) and the final state (Hv, Dv, Dk) fp32."""
    n, heads, dv = v.shape
    s = state.float().transpose(-1, -2) if state is not None else \
        v.new_zeros(heads, q.shape[-1], dv, dtype=torch.float32)  # (H, Dk, Dv)
    if out is None:
        out = v.new_empty(n, heads, dv, dtype=torch.float32)
    for start in range(0, n, chunk):
        rows = slice(start, min(n, start + chunk))
        out[rows], s = _delta_chunk(q[rows], k[rows], v[rows], g[rows], beta[rows], s)
    return out, s.transpose(-1, -2)


def _delta_chunk(q, k, v, g, beta, s):
    """One chunk of l tokens from state s (H, Dk, Dv), heads first: (out (l, H, Dv), the new
    state). The UT transform (I + strictly lower (beta k k^T o decay))^-1 turns the chunk's
    delta-rule updates into two triangular solves, as transformers' torch fallback does."""
    q, k, v, g, beta = _heads_first(q, k, v, g, beta)  # (H, l, D), (H, l)
    g = g.cumsum(dim=-1)
    size = g.shape[-1]
    upper = torch.ones(size, size, dtype=torch.bool, device=q.device).triu(1)
    pair = (g[..., :, None] - g[..., None, :]).masked_fill_(upper, float("-inf")).exp_()
    k_beta = k * beta[..., None]
    system = torch.bmm(k_beta, k.transpose(1, 2)).mul_(pair)
    values = torch.linalg.solve_triangular(system, v.mul_(beta[..., None]), upper=False,
                                           unitriangular=True)
    k_cum = torch.linalg.solve_triangular(system, k_beta.mul_(g.exp()[..., None]), upper=False,
                                          unitriangular=True)
    del system, k_beta
    values.sub_(torch.bmm(k_cum, s))  # the new values: what the state does not yet predict
    del k_cum
    out = torch.bmm(q * g.exp()[..., None], s)
    out.baddbmm_(torch.bmm(q, k.transpose(1, 2)).mul_(pair), values)
    new = s * g[:, -1:].exp()[..., None]
    new.baddbmm_(k.mul_((g[:, -1:] - g).exp()[..., None]).transpose(1, 2), values)
    return out.transpose(0, 1), new


def delta_rule_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                    beta: torch.Tensor,
                    states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per sequence: q, k (S, Hk, Dk); v (S, Hv, Dv); g, beta (S, Hv); states
    (S, Hv, Dv, Dk) fp32, updated in place. Returns (S, Hv, Dv) fp32 and the states."""
    rep = v.shape[1] // k.shape[1]
    q, k = (t.repeat_interleave(rep, dim=1) if rep > 1 else t for t in (q, k))
    q, k = l2norm(q.float()), l2norm(k.float())
    q = q * q.shape[-1] ** -0.5
    states.mul_(g.float().exp()[..., None, None])  # (S, H, Dv, Dk)
    delta = (v.float() - torch.einsum("shvk,shk->shv", states, k)) * beta.float()[..., None]
    states += delta[..., None] * k[:, :, None, :]
    return torch.einsum("shvk,shk->shv", states, q), states
