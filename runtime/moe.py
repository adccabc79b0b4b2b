"""The mixture-of-experts block: a router, the routed experts run by grouping tokens per expert,
and the shared experts beside them (DeepSeek-V3's plain ones, Qwen's sigmoid-gated one).

One step's tokens are permuted so each expert's rows are contiguous (a stable sort of the
(token, choice) pairs by expert), the experts' gate/up and down projections run as two grouped
matmuls over those segments (torch's grouped_mm where it serves, else one matmul per expert
hit), and the weighted rows are added back into their tokens in expert order, as transformers
and vLLM's fused MoE combine them. Its transient is therefore a closed form of the step's
tokens x top_k, whatever the routing (ledger/moe_estimate.py moe_peak).

Expert weights are stacked: gate_up_proj (E, 2I, H) with the gate's rows first, down_proj
(E, H, I), and gpt-oss's biases (E, 2I), (E, H); expert_weights.py folds a checkpoint's
per-expert tensors (or gpt-oss's interleaved ones) into them.
"""

from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec

from .parallel import SINGLE, TensorParallel, all_reduce
from .router import FAMILY_DEFAULTS, Routing, check_routing, route, routing_from_config

# gpt-oss's clamped SwiGLU constants (GptOssExperts; vLLM's swigluoai): alpha is not in its
# config.json, the limit is swiglu_limit
SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0


@dataclass(frozen=True)
class MoEOptions:
    """Numerics of the MoE block that config.json states and the ledger does not need."""

    routing: Routing = Routing()
    # gpt-oss: (alpha, limit) of its clamped SwiGLU, (up + 1) x gate x sigmoid(alpha x gate);
    # None: SiLU(gate) x up
    swiglu: tuple[float, float] | None = None


def moe_options(config: dict, where: str = "config.json") -> MoEOptions | None:
    """An MoE family's routing and gpt-oss's SwiGLU constants (swiglu_alpha, swiglu_limit) as
    config.json states them; None for a family the runtime does not route."""
    model_type = config.get("model_type")
    if model_type not in FAMILY_DEFAULTS:
        return None
    act = config.get("hidden_act", "silu")
    if model_type != "gpt_oss" and act not in ("silu", "swish"):  # gpt-oss: its own SwiGLU
        raise SpecError("hidden_act", act, "the runtime's experts run SiLU (silu)").at(where)
    swiglu = None
    if model_type == "gpt_oss":
        swiglu = (float(config.get("swiglu_alpha", SWIGLU_ALPHA)),
                  float(config.get("swiglu_limit", SWIGLU_LIMIT)))
    return MoEOptions(routing_from_config(model_type, config, where), swiglu)


def family_options(model_type: str) -> MoEOptions:
    """The family's routing and expert activation when no config.json states them."""
    return moe_options({"model_type": model_type}) or MoEOptions()


class Router(nn.Module):
    """logits = x W^T (+ b: gpt-oss); DeepSeek-V3's e_score_correction_bias steers the choice."""

    def __init__(self, spec: ModelSpec, opts: MoEOptions) -> None:
        super().__init__()
        moe = spec.moe
        self.weight = nn.Parameter(torch.empty(moe.num_experts, spec.hidden_size))
        self.routing, self.top_k = opts.routing, moe.num_experts_per_tok
        check_routing(opts.routing, moe.num_experts, moe.num_experts_per_tok)
        if moe.router_bias and opts.routing.correction_bias:
            self.e_score_correction_bias = nn.Parameter(torch.empty(moe.num_experts))
        elif moe.router_bias:
            self.bias = nn.Parameter(torch.empty(moe.num_experts))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (T, H) -> weights (T, k) fp32, expert ids (T, k). Logits in the activation dtype,
        scored in fp32 (no fp32 copy of the weight, which is E x H)."""
        logits = F.linear(x, self.weight, getattr(self, "bias", None))  # (T, E)
        return route(logits, self.routing, self.top_k,
                     getattr(self, "e_score_correction_bias", None))


class Experts(nn.Module):
    """E experts, stacked. forward(x, weights, ids) = sum over each token's k experts of
    weight x down(act(gate_up(x))); under tensor parallelism this rank's 1/tp of every
    expert's columns, a partial sum its caller reduces."""

    def __init__(self, spec: ModelSpec, opts: MoEOptions, tp: TensorParallel = SINGLE) -> None:
        super().__init__()
        moe, h = spec.moe, spec.hidden_size
        e, inter = moe.num_experts, moe.expert_intermediate_size // tp.size
        self.inter, self.swiglu, self.tp = inter, opts.swiglu, tp
        self.gate_up_proj = nn.Parameter(torch.empty(e, 2 * inter, h))
        self.down_proj = nn.Parameter(torch.empty(e, h, inter))
        if moe.expert_bias:
            self.gate_up_proj_bias = nn.Parameter(torch.empty(e, 2 * inter))
            self.down_proj_bias = nn.Parameter(torch.empty(e, h))

    def forward(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor
                ) -> torch.Tensor:
        tokens, top_k = ids.shape
        flat = ids.flatten()  # (T k,)
        order = flat.argsort(stable=True)  # rows grouped by expert, tokens in order within
        counts = torch.bincount(flat, minlength=self.gate_up_proj.shape[0])  # (E,)
        del flat
        source = order // top_k  # (T k,) the token each permuted row came from
        rows = x.index_select(0, source)  # (T k, H)
        h = self._project(rows, self.gate_up_proj, counts, "gate_up_proj_bias")  # (T k, 2I)
        del rows
        h = self._activate(h)  # (T k, I), a view of h's storage
        out_rows = self._project(h, self.down_proj, counts, "down_proj_bias")  # (T k, H)
        del h
        out_rows *= weights.flatten().index_select(0, order)[:, None].to(out_rows.dtype)
        out = x.new_zeros(tokens, x.shape[1])
        return out.index_add_(0, source, out_rows)  # in expert order, as transformers adds

    def _project(self, rows: torch.Tensor, stacked: torch.Tensor, counts: torch.Tensor,
                 bias_name: str) -> torch.Tensor:
        """rows (M, K) through each segment's expert (E, N, K): (M, N), plus its bias."""
        if grouped_mm_serves(rows.device, rows.dtype, stacked.shape[1], stacked.shape[2]):
            out = F.grouped_mm(rows, stacked.transpose(1, 2),
                               offs=counts.cumsum(0).to(torch.int32))
            segments = _segments(counts) if hasattr(self, bias_name) else ()
        else:
            segments = _segments(counts)
            out = rows.new_empty(rows.shape[0], stacked.shape[1])
            for expert, start, end in segments:
                torch.mm(rows[start:end], stacked[expert].T, out=out[start:end])
        if hasattr(self, bias_name) and (bias_name != "down_proj_bias" or self.tp.rank == 0):
            bias = getattr(self, bias_name)
            for expert, start, end in segments:
                out[start:end] += bias[expert]
        return out

    def _activate(self, h: torch.Tensor) -> torch.Tensor:
        """SiLU(gate) x up, or gpt-oss's clamped SwiGLU, written over the gate's half of h."""
        gate, up = h[:, :self.inter], h[:, self.inter:]
        if self.swiglu is None:
            return F.silu(gate, inplace=True).mul_(up)
        alpha, limit = self.swiglu
        gate.clamp_(max=limit)
        up.clamp_(-limit, limit).add_(1.0)
        glu = torch.sigmoid(gate * alpha)
        return gate.mul_(glu).mul_(up)


def _segments(counts: torch.Tensor) -> list[tuple[int, int, int]]:
    """(expert, first row, end row) of each expert that received rows."""
    out, start = [], 0
    for expert, count in enumerate(counts.tolist()):
        if count:
            out.append((expert, start, start + count))
            start += count
    return out


@cache
def grouped_mm_serves(device: torch.device, dtype: torch.dtype, n: int, k: int) -> bool:
    """torch's grouped_mm runs on the CPU in every float dtype here, on CUDA in bf16 from sm80;
    a trial on tiny rows of the real widths decides, so a kernel's layout rule never fails a
    step (the per-expert loop computes the same)."""
    if device.type == "cuda" and (dtype != torch.bfloat16
                                  or torch.cuda.get_device_capability(device) < (8, 0)):
        return False
    try:
        rows = torch.zeros(2, k, dtype=dtype, device=device)
        stacked = torch.zeros(2, n, k, dtype=dtype, device=device)
        F.grouped_mm(rows, stacked.transpose(1, 2),
                     offs=torch.tensor([1, 2], dtype=torch.int32, device=device))
    except (RuntimeError, NotImplementedError):
        return False
    return True


# model_type -> (the router's module name, the shared expert's) as its checkpoints name them
NAMES = {"gpt_oss": ("router", ""), "deepseek_v3": ("gate", "shared_experts")}
QWEN_NAMES = ("gate", "shared_expert")


class SparseMoE(nn.Module):
    """Routed experts, plus the shared expert every token takes (scaled by sigmoid(x w) where
    a shared_expert_gate is stated: Qwen2-MoE, Qwen3-Next)."""

    def __init__(self, spec: ModelSpec, opts: MoEOptions, dense_mlp,
                 tp: TensorParallel = SINGLE) -> None:
        super().__init__()
        moe = spec.moe
        self.router_name, shared_name = NAMES.get(spec.model_type, QWEN_NAMES)
        setattr(self, self.router_name, Router(spec, opts))
        self.experts, self.tp = Experts(spec, opts, tp), tp
        self.shared_name = shared_name if moe.num_shared_experts else ""
        if self.shared_name:
            width = moe.shared_intermediate_size or \
                moe.expert_intermediate_size * moe.num_shared_experts
            setattr(self, self.shared_name, dense_mlp(width))
        if moe.shared_expert_gate:
            self.shared_expert_gate = nn.Linear(spec.hidden_size, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, ids = getattr(self, self.router_name)(x)
        out = all_reduce(self.experts(x, weights, ids), self.tp)  # (T, H)
        del weights, ids
        if self.shared_name:
            shared = getattr(self, self.shared_name)(x)
            if hasattr(self, "shared_expert_gate"):
                shared *= torch.sigmoid(self.shared_expert_gate(x))
            out += shared
        return out
