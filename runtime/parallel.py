"""Tensor parallelism: which heads and MLP columns a rank holds, and the sums that join them.

Megatron-style: q/k/v and gate/up are split by output rows (heads, MLP columns), o_proj and
down_proj by input columns, and their partial outputs are summed across ranks. KV heads follow
the ledger: ceil(H_kv / tp) per rank, replicated when H_kv < tp. The embedding and lm_head are
split by vocabulary rows as vLLM splits them (padded to a multiple of 64): a lookup is summed
across ranks and the logits are gathered, so every rank samples the same tokens. Norms are
replicated.
"""

from dataclasses import dataclass

import torch

from servecap.ledger.arch import routed_layers
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import kv_heads_per_rank
from servecap.ledger.model import ModelSpec
from servecap.ledger.sharding import vocab_rows_per_rank


@dataclass(frozen=True)
class TensorParallel:
    """This process's rank among `size`; group None means torch.distributed's default group."""

    rank: int = 0
    size: int = 1
    group: object = None


SINGLE = TensorParallel()


def check_split(spec: ModelSpec, tp: TensorParallel) -> None:
    att = spec.attention
    if tp.size > 1 and (spec.state_layers or att.q_gate or spec.model_type == "nemotron_h"):
        raise SpecError("tensor_parallel_size", tp.size, f"the runtime runs {spec.model_type}'s "
                        "hybrid layers on one device only (1)")
    widths = [w for w in mlp_widths(spec) if w % tp.size]
    if spec.attention.num_heads % tp.size or widths:
        raise SpecError("tensor_parallel_size", tp.size, f"must divide num_attention_heads "
                        f"({att.num_heads}) and the MLP and expert widths "
                        f"({', '.join(map(str, mlp_widths(spec)))})")
    if att.kind != "mla" and att.num_kv_heads % tp.size and tp.size % att.num_kv_heads:
        raise SpecError("tensor_parallel_size", tp.size, "must divide num_key_value_heads "
                        f"({att.num_kv_heads}) or be a multiple of it")


def mlp_widths(spec: ModelSpec) -> list[int]:
    """The widths tensor parallelism splits: the dense MLP's where a layer has one, each
    expert's (vLLM's TP MoE splits every expert's columns) and the shared experts'."""
    with_mlp = range(spec.num_layers) if spec.mlp_layers is None else spec.mlp_layers
    routed = routed_layers(spec)
    out = [spec.intermediate_size] if set(with_mlp) - set(routed) else []
    if routed:
        moe = spec.moe
        out.append(moe.expert_intermediate_size)
        if moe.num_shared_experts:
            out.append(moe.shared_intermediate_size
                       or moe.expert_intermediate_size * moe.num_shared_experts)
    return out


def heads(spec: ModelSpec, tp: TensorParallel) -> tuple[int, int, int]:
    """(query heads, first KV head, KV heads) this rank holds."""
    att = spec.attention
    num_q = att.num_heads // tp.size
    group = att.num_heads // att.num_kv_heads
    return num_q, tp.rank * num_q // group, kv_heads_per_rank(spec, tp.size)


def shard(name: str, full: torch.Tensor, spec: ModelSpec, tp: TensorParallel) -> torch.Tensor:
    """This rank's slice of a full checkpoint tensor named like model.layers.0.mlp.up_proj."""
    if tp.size == 1:
        return full
    if ".experts." in name:
        return _expert_shard(name, full, tp)
    num_q, first_kv, num_kv = heads(spec, tp)
    if spec.attention.kind == "mla" and ".self_attn." in name:
        return _latent_shard(name, full, spec, tp)
    dim, start = spec.attention.head_dim, tp.rank * num_q
    if ".q_proj." in name:
        return full[start * dim:(start + num_q) * dim]
    if ".k_proj." in name or ".v_proj." in name:
        return full[first_kv * dim:(first_kv + num_kv) * dim]
    if name.endswith(".sinks"):
        return full[start:start + num_q]
    if ".o_proj." in name:  # its bias is every rank's (rank 0 adds it)
        return full if full.dim() == 1 else full[:, start * dim:(start + num_q) * dim]
    if ".gate_proj." in name or ".up_proj." in name:
        return _part(full, 0, tp)
    if ".down_proj." in name:
        return _part(full, 1, tp)
    if "embed_tokens." in name or name.startswith("lm_head."):
        return _vocab_shard(full, spec, tp)
    return full


def _part(full: torch.Tensor, dim: int, tp: TensorParallel) -> torch.Tensor:
    """This rank's 1/tp of `full` along dim (MLP columns of any width: dense or shared)."""
    per = full.shape[dim] // tp.size
    return full.narrow(dim, tp.rank * per, per)


def _expert_shard(name: str, full: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """Every expert's columns split as vLLM's TP MoE splits them: this rank's share of the
    gate rows and of the up rows of gate_up_proj (E, 2I, H) and its bias, of down_proj's
    inputs (E, H, I); down_proj's bias is every rank's (rank 0 adds it)."""
    if name.endswith("gate_up_proj") or name.endswith("gate_up_proj_bias"):
        gate, up = full.chunk(2, dim=1)
        return torch.cat((_part(gate, 1, tp), _part(up, 1, tp)), dim=1)
    if name.endswith("down_proj"):
        return _part(full, 2, tp)
    return full


def _latent_shard(name: str, full: torch.Tensor, spec: ModelSpec, tp: TensorParallel
                  ) -> torch.Tensor:
    """MLA: q_proj / q_b_proj and kv_b_proj by head (nope + rope, nope + v rows each), o_proj by
    head's v columns; the latent projections and their norms are every rank's."""
    att = spec.attention
    num_q = att.num_heads // tp.size
    rows = {".q_proj.": att.qk_nope_head_dim + att.qk_rope_head_dim,
            ".q_b_proj.": att.qk_nope_head_dim + att.qk_rope_head_dim,
            ".kv_b_proj.": att.qk_nope_head_dim + att.v_head_dim}
    for key, per_head in rows.items():
        if key in name:
            return full[tp.rank * num_q * per_head:(tp.rank + 1) * num_q * per_head]
    if ".o_proj." in name:
        return full[:, tp.rank * num_q * att.v_head_dim:(tp.rank + 1) * num_q * att.v_head_dim]
    return full


def vocab_rows(spec: ModelSpec, tp: TensorParallel) -> tuple[int, int]:
    """(first vocabulary row, rows) of this rank's embedding / lm_head slice."""
    if tp.size == 1:
        return 0, spec.vocab_size
    rows = vocab_rows_per_rank(spec.vocab_size, tp.size)
    return tp.rank * rows, rows


def _vocab_shard(full: torch.Tensor, spec: ModelSpec, tp: TensorParallel) -> torch.Tensor:
    start, rows = vocab_rows(spec, tp)
    padded = full.new_zeros((rows * tp.size, *full.shape[1:]))
    padded[:full.shape[0]] = full
    return padded[start:start + rows]


def all_gather_last(x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """Concatenate every rank's slice along the last dimension, in rank order."""
    if tp.size == 1:
        return x
    import torch.distributed as dist

    parts = [torch.empty_like(x) for _ in range(tp.size)]
    dist.all_gather(parts, x.contiguous(), group=tp.group)
    return torch.cat(parts, dim=-1)


def all_reduce(x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """Sum partial outputs of row-parallel layers across ranks (in place)."""
    if tp.size > 1:
        import torch.distributed as dist

        dist.all_reduce(x, group=tp.group)
    return x


def broadcast_int(value: int, tp: TensorParallel, device: torch.device) -> int:
    """Rank 0's value on every rank: keeps time-based decisions (arrivals) in lockstep."""
    if tp.size == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], device=device)
    dist.broadcast(t, src=0, group=tp.group)
    return int(t)
