"""The runtime-peak terms of MoE layers (runtime/moe.py, router.py): one step of T tokens, term
by term; ledger/runtime_estimate.py takes the widest layer.

The MoE block permutes the step's T x k (token, expert) rows so each expert's are contiguous,
runs the experts' gate/up and down projections as grouped matmuls over those rows, and adds
the weighted rows back into their tokens. Every intermediate is a multiple of T x k rows,
however the tokens are routed (all to one expert or spread over all), so the bound is a closed
form of the step's shape, exact to the byte on the CPU allocator for the routed part.
"""

from dataclasses import dataclass

from .arch import routed_layers
from .model import ModelSpec

FP32 = 4
INDEX = 8  # int64 expert ids, the permutation and each row's source token
OFFSETS = 8 + 8 + 4  # per expert: its row count, their running sum, the int32 offsets
# families whose router scores with a sigmoid and a correction bias over groups of experts
GROUPED_SIGMOID = ("deepseek_v3",)
CLAMPED_SWIGLU = ("gpt_oss",)


@dataclass(frozen=True)
class MoEDims:
    """One rank's MoE widths: experts, top_k, an expert's and the shared experts' intermediate
    (0: none), and which router and activation the family runs."""

    experts: int
    top_k: int
    inter: int
    shared: int = 0
    grouped_sigmoid: bool = False  # DeepSeek-V3: sigmoid, correction bias, grouped choice
    clamped: bool = False  # gpt-oss: clamp, then (up + 1) x gate x sigmoid(alpha x gate)
    shared_gate: bool = False  # Qwen: sigmoid(x w) scales the shared expert


def moe_dims(spec: ModelSpec, tensor_parallel_size: int = 1) -> MoEDims | None:
    """None when no layer routes to experts; intermediates split by the tensor-parallel size
    (each expert's columns on every rank, vLLM's TP MoE)."""
    moe = spec.moe
    if not routed_layers(spec):
        return None
    shared = 0
    if moe.num_shared_experts:
        shared = moe.shared_intermediate_size or \
            moe.expert_intermediate_size * moe.num_shared_experts
    return MoEDims(moe.num_experts, moe.num_experts_per_tok,
                   moe.expert_intermediate_size // tensor_parallel_size,
                   shared // tensor_parallel_size, spec.model_type in GROUPED_SIGMOID,
                   spec.model_type in CLAMPED_SWIGLU, moe.shared_expert_gate)


def moe_peak(d: MoEDims, tokens: int, hidden: int, act: int) -> int:
    """The widest phase of one MoE layer beyond the residual stream, for a step of `tokens`
    tokens in `act`-byte activations:
    held     the normed input (T x H), through every phase
    router   router_peak
    experts  each token's k weights (fp32) and ids (int64), the permutation and each row's
             source token (T k int64 each), counts and offsets per expert, and the widest of:
             the permuted rows with their gate/up output (T k x (H + 2I)); gate/up with the
             clamped SwiGLU's two (T k, I) temporaries; gate/up with the down output
             (T k x (2I + H)); the down output, its row weights (fp32 and cast) and the
             combined (T, H) output
    shared   the combined output (T x H) beside the shared MLP's gate and up (2 x T x Is), then
             its gate and down output (T x (Is + H)), and the shared gate's two (T, 1)."""
    t, b, rows = tokens, act, tokens * d.top_k
    cast = FP32 if act != FP32 else 0
    held = t * hidden * b
    kept = rows * (FP32 + INDEX) + 2 * rows * INDEX + d.experts * OFFSETS
    gate_up = rows * 2 * d.inter * b
    experts = kept + max(rows * hidden * b + gate_up,
                         gate_up + (2 * rows * d.inter * b if d.clamped else 0),
                         gate_up + rows * hidden * b,
                         rows * hidden * b + rows * (FP32 + b) + t * hidden * b)
    shared = 0
    if d.shared:
        shared = t * hidden * b + max(2 * t * d.shared * b, t * (d.shared + hidden) * b) \
            + (2 * t * b if d.shared_gate else 0)
    return held + max(router_peak(d, t, b, cast, hidden), experts, shared)


def router_peak(d: MoEDims, t: int, b: int, cast: int, hidden: int) -> int:
    """Logits (T x E) in the activation dtype, their fp32 copy (when not fp32) and the fp32
    scores; DeepSeek-V3's grouped choice adds the bias-corrected scores and their masked copy,
    and while the groups are scored the two best of each group (values and int64 indices) and
    the group scores: at most E / 2 groups (a group scores as its two best). Then each
    token's k weights and ids."""
    e = d.experts
    picked = t * d.top_k * (2 * FP32 + INDEX)
    if not d.grouped_sigmoid:
        return t * e * (b + cast + FP32) + picked
    groups = t * (e // 2) * (2 * (FP32 + INDEX) + FP32)
    return t * e * (b + cast) + t * e * FP32 * 2 + max(groups, t * e * FP32) + picked
