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
    """(..., L) -> (..., L, L): entry [i, j] = Σ x[j+1..i] below the diagonal, -inf above."""
    size = x.shape[-1]
    x = x[..., None].expand(*x.shape, size)
    below = torch.tril(torch.ones(size, size, dtype=torch.bool, device=x.device), diagonal=-1)
    sums = torch.cumsum(x.masked_fill(~below, 0), dim=-2)
    keep = torch.tril(torch.ones(size, size, dtype=torch.bool, device=x.device), diagonal=0)
    return sums.masked_fill(~keep, float("-inf"))


def ssd_scan(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
             c: torch.Tensor, d: torch.Tensor, state: torch.Tensor | None,
             chunk: int = STATE_SCAN_CHUNK_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's state space of one chunk of n tokens, in chunks of `chunk` (the SSD form).
    x (n, H, P); dt (n, H) already softplus'd and clamped; a (H,) < 0; b, c (n, G, N);
    d (H,); state (H, P, N) or None. Returns y (n, H, P) fp32 and the final state fp32."""
    n, heads, _ = x.shape
    rep = heads // b.shape[1]
    x = x.float()
    b = b.float().repeat_interleave(rep, dim=1)  # (n, H, N)
    c = c.float().repeat_interleave(rep, dim=1)
    pad = (chunk - n % chunk) % chunk
    skip = d[:, None].float() * x  # (n, H, P)
    x = x * dt[..., None].float()
    da = a.float() * dt.float()  # (n, H)
    xs, da, b, c = (F.pad(t, (0, 0) * (t.dim() - 1) + (0, pad)).view(-1, chunk, *t.shape[1:])
                    for t in (x, da, b, c))  # (chunks, L, ...)
    da = da.permute(2, 0, 1)  # (H, chunks, L)
    cum = torch.cumsum(da, dim=-1)
    decay = torch.exp(_segment_sum(da))  # (H, chunks, L, L)
    scores = torch.einsum("zlhn,zshn->zlsh", c, b) * decay.permute(1, 2, 3, 0)
    y_diag = torch.einsum("zlsh,zshp->zlhp", scores, xs)
    to_end = torch.exp(cum[:, :, -1:] - cum)  # (H, chunks, L)
    states = torch.einsum("zlhn,zlhp->zhpn", b * to_end.permute(1, 2, 0)[..., None], xs)
    start = state[None].float() if state is not None else torch.zeros_like(states[:1])
    states = torch.cat((start, states))  # (chunks + 1, H, P, N)
    across = torch.exp(_segment_sum(F.pad(cum[:, :, -1], (1, 0))))  # (H, chunks+1, chunks+1)
    states = torch.einsum("hcz,zhpn->chpn", across, states)
    states, final = states[:-1], states[-1]
    y_off = torch.einsum("zlhn,zhpn->zlhp", c, states) * torch.exp(cum).permute(1, 2, 0)[..., None]
    y = (y_diag + y_off).reshape(-1, heads, x.shape[-1])[:n] + skip
    return y, final


def ssd_step(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
             c: torch.Tensor, d: torch.Tensor,
             states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per sequence: x (S, H, P), dt (S, H) already softplus'd, b, c (S, G, N),
    states (S, H, P, N). Returns y (S, H, P) fp32 and the new states fp32."""
    rep = x.shape[1] // b.shape[1]
    dt = dt.float()[..., None]  # (S, H, 1)
    decay = torch.exp(dt * a.float()[:, None])[..., None]  # (S, H, 1, 1)
    b = b.float().repeat_interleave(rep, dim=1)[:, :, None, :]  # (S, H, 1, N)
    c = c.float().repeat_interleave(rep, dim=1)
    new = states.float() * decay + (dt[..., None] * b) * x.float()[..., None]
    y = torch.einsum("shpn,shn->shp", new, c) + x.float() * d.float()[:, None]
    return y, new


# -- gated delta rule (gated DeltaNet) ----------------------------------------------------------
def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _prepare(q, k, v, g, beta):
    """fp32, heads first, q and k L2-normalised and repeated to the value heads, q scaled."""
    rep = v.shape[1] // k.shape[1]
    q, k = (t.repeat_interleave(rep, dim=1) if rep > 1 else t for t in (q, k))
    q, k, v, g, beta = (t.transpose(0, 1).float().contiguous() for t in (q, k, v, g, beta))
    q, k = l2norm(q), l2norm(k)
    return q * q.shape[-1] ** -0.5, k, v, g, beta


def delta_rule_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                       beta: torch.Tensor, state: torch.Tensor | None,
                       chunk: int = STATE_SCAN_CHUNK_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule over one chunk of n tokens, in chunks of `chunk` (the UT form).
    q, k (n, Hk, Dk); v (n, Hv, Dv); g, beta (n, Hv); state (Hv, Dv, Dk) or None.
    Returns the output (n, Hv, Dv) fp32 and the final state (Hv, Dv, Dk) fp32."""
    n = q.shape[0]
    q, k, v, g, beta = _prepare(q, k, v, g, beta)  # (H, n, D), (H, n)
    heads, _, dk = k.shape
    pad = (chunk - n % chunk) % chunk
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    beta, g = (F.pad(t, (0, pad)) for t in (beta, g))
    v_beta, k_beta = v * beta[..., None], k * beta[..., None]
    q, k, k_beta, v_beta = (t.view(heads, -1, chunk, t.shape[-1]) for t in (q, k, k_beta, v_beta))
    g = g.view(heads, -1, chunk).cumsum(dim=-1)  # (H, chunks, L)
    upper = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).triu(1)
    pair = (g[..., :, None] - g[..., None, :]).masked_fill(upper, float("-inf")).exp()
    system = (k_beta @ k.transpose(-1, -2)) * pair
    intra = (q @ k.transpose(-1, -2)) * pair
    values = torch.linalg.solve_triangular(system, v_beta, upper=False, unitriangular=True)
    k_cum = torch.linalg.solve_triangular(system, k_beta * g.exp()[..., None], upper=False,
                                          unitriangular=True)
    s = state.float().transpose(-1, -2) if state is not None else \
        q.new_zeros(heads, dk, v.shape[-1])  # (H, Dk, Dv)
    out = torch.zeros_like(values)
    q = q * g.exp()[..., None]
    k = k * (g[..., -1:] - g).exp()[..., None]
    last = g[..., -1].exp()[..., None, None]
    for i in range(values.shape[1]):
        v_new = values[:, i] - k_cum[:, i] @ s
        out[:, i] = q[:, i] @ s + intra[:, i] @ v_new
        s = s * last[:, i] + k[:, i].transpose(-1, -2) @ v_new
    out = out.reshape(heads, -1, out.shape[-1])[:, :n]
    return out.transpose(0, 1), s.transpose(-1, -2)


def delta_rule_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                    beta: torch.Tensor,
                    states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per sequence: q, k (S, Hk, Dk); v (S, Hv, Dv); g, beta (S, Hv); states
    (S, Hv, Dv, Dk). Returns (S, Hv, Dv) fp32 and the new states fp32."""
    rep = v.shape[1] // k.shape[1]
    q, k = (t.repeat_interleave(rep, dim=1) if rep > 1 else t for t in (q, k))
    q, k = l2norm(q.float()), l2norm(k.float())
    q = q * q.shape[-1] ** -0.5
    m = states.float() * g.float().exp()[..., None, None]  # (S, H, Dv, Dk)
    remembered = torch.einsum("shvk,shk->shv", m, k)
    delta = (v.float() - remembered) * beta.float()[..., None]
    m = m + delta[..., None] * k[:, :, None, :]
    return torch.einsum("shvk,shk->shv", m, q), m
