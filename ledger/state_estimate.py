"""The runtime-peak terms of hybrids' state layers (runtime/mixers.py, recurrences.py), one step
of T query rows, term by term; ledger/runtime_estimate.py takes the widest layer.

A prefill chunk runs the short causal conv over its rows, then the scan a STATE_SCAN_CHUNK_TOKENS
chunk at a time, so beyond the rows' projections and outputs its intermediates are bounded by
the chunk (l x l per head, a state or two). Decodes gather state_group_rows sequences' states
from the pool, step them in place and write them back, so their transient is bounded by the
group. Nothing here depends on the context length or on how many requests are resident.
"""

from dataclasses import dataclass

from .model import CONV, LINEAR, MAMBA, ModelSpec

FP32 = 4
CONV_COPIES = 4  # the causal conv: its padded input, that input made contiguous, its output, SiLU


@dataclass(frozen=True)
class StateDims:
    """One state layer's widths: projection rows, conv channels and kernel, heads, the
    recurrent state's two dims, the output width, its norm width; kind mamba or linear."""

    kind: str
    proj: int
    conv: int
    kernel: int
    heads: int
    a: int  # Mamba-2 head_dim / gated DeltaNet v dim
    b: int  # Mamba-2 d_state / gated DeltaNet k dim
    out: int  # Mamba-2 intermediate / gated DeltaNet Hv x dv
    key_heads: int = 0  # gated DeltaNet: k heads (q and k are repeated to the v heads)
    groups: int = 0  # Mamba-2: B/C groups

    @property
    def state(self) -> int:
        """fp32 elements of one request's recurrent state (a short conv's: its conv window)."""
        if self.kind == CONV:
            return (self.kernel - 1) * self.conv
        return self.heads * self.a * self.b


def state_dims(spec: ModelSpec) -> StateDims | None:
    """The state layers' widths (None for a model without them)."""
    st = spec.state
    if st is None or not spec.state_layers:
        return None
    heads, (a, b) = st.recurrent_heads, st.recurrent_shape
    if st.kind == CONV:  # LFM2's ShortConv: in_proj (B, C, x), the conv, out_proj; no scan
        return StateDims(CONV, 3 * st.conv_dim, st.conv_dim, st.conv_kernel, 0, 0, 0,
                         st.conv_dim)
    if st.kind == MAMBA:
        return StateDims(MAMBA, st.intermediate + st.conv_dim + heads, st.conv_dim,
                         st.conv_kernel, heads, a, b, st.intermediate, groups=st.n_groups)
    key_heads = (st.conv_dim - heads * a) // (2 * b)
    return StateDims(LINEAR, st.conv_dim + heads * a + 2 * heads, st.conv_dim, st.conv_kernel,
                     heads, a, b, heads * a, key_heads=key_heads)


def state_layer_peak(d: StateDims, tokens: int, num_decode: int, act: int, chunk: int,
                     group: int) -> int:
    """The widest phase of one state layer beyond the residual stream, for a step of `tokens`
    rows of which the first num_decode are one-token decodes (the rest one prefill chunk):
    held      what lives through the scan: Mamba-2's projections (T x proj; gate, x B C and dt
              are views of them) and its fp32 output; gated DeltaNet's q k v joined for the conv,
              z, b, a, the gates beta and g, and its output
    split     gated DeltaNet only, before: the projections and their per-head copies (2 x proj)
    conv      the causal conv of the widest row group (CONV_COPIES x its rows x channels)
    scan      the group's conv output and SiLU, then the widest of: a decode group's gathered
              states and their update (2 x rows x state, and their B C or q k), a prefill
              chunk's work (chunk_work)
    norm      the gated norm's fp32 copies of the output (3 x T x out) and its result"""
    f, t = FP32, tokens
    if d.kind == CONV:  # the projections, then B x x, its causal conv, C x that
        rows = max(min(group, num_decode), t - num_decode)
        return t * d.proj * act + max(CONV_COPIES * (rows + d.kernel - 1) * d.conv * act,
                                      2 * t * d.out * act)
    if d.kind == MAMBA:
        held, split = t * d.proj * act + t * d.out * f, 0
    else:
        held = t * (d.conv + d.out + 2 * d.heads) * act + t * d.heads * (act + f) \
            + t * d.out * act
        split = 2 * t * d.proj * act
    prefill = t - num_decode
    rows = max(min(group, num_decode), prefill)
    conv = CONV_COPIES * (rows + d.kernel - 1) * d.conv * act
    decode = 0
    if num_decode:
        g = min(group, num_decode)
        decode = 2 * g * d.state * f + g * _step_extra(d) * f
    work = chunk_work(d, min(chunk, prefill)) if prefill else 0
    scan = 2 * rows * d.conv * act + max(decode, work)
    norm = 3 * t * d.out * f + t * d.out * act
    return max(split, held + max(conv, scan, norm))


def _step_extra(d: StateDims) -> int:
    """fp32 elements per decoding sequence beside its state: the repeated and scaled B, C (or
    q, k), the output and its skip term."""
    return 4 * d.heads * d.b + 3 * d.heads * d.a


def chunk_work(d: StateDims, rows: int) -> int:
    """One scan chunk of l = `rows` tokens, fp32, heads first (recurrences._ssd_chunk,
    _delta_chunk), beside the state it starts from:
    Mamba-2   B and C repeated to the heads, x dt; then the widest of the scores with the
              decay's segment sums (3 l x l per head) and the output with the new state
    DeltaNet  q, k, v and the pairwise decay; then the widest of the UT system with its two
              solves, the new values with the intra-chunk attention and output, and the new
              state; and the chunk's masks, decays and gates (small)."""
    f, h, l_ = FP32, d.heads, rows
    square = h * l_ * l_
    small = 2 * l_ * l_ + 6 * h * l_ * f
    if d.kind == MAMBA:
        bc, xs = 2 * l_ * h * d.b, l_ * h * d.a
        return f * (bc + max(xs + 3 * square, 2 * xs + d.state)) + small
    qk, v = l_ * h * d.b, l_ * h * d.a
    return f * (2 * qk + v + square + max(2 * qk + v + square, qk + 2 * v + square,
                                          2 * v + d.state)) + small
