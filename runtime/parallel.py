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
    unsplit = [what for what, has in (("experts", spec.moe is not None),
                                      ("latent attention", att.kind == "mla"),
                                      ("attention sinks", att.sinks)) if has]
    if tp.size > 1 and unsplit:
        raise SpecError("tensor_parallel_size", tp.size, f"the runtime runs {spec.model_type}'s "
                        f"{' and '.join(unsplit)} on one device only (1) yet")
    if spec.attention.num_heads % tp.size or spec.intermediate_size % tp.size:
        raise SpecError("tensor_parallel_size", tp.size, f"must divide num_attention_heads "
                        f"({att.num_heads}) and intermediate_size ({spec.intermediate_size})")
    if att.num_kv_heads % tp.size and tp.size % att.num_kv_heads:
        raise SpecError("tensor_parallel_size", tp.size, "must divide num_key_value_heads "
                        f"({att.num_kv_heads}) or be a multiple of it")


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
    dim = spec.attention.head_dim
    num_q, first_kv, num_kv = heads(spec, tp)
    inter = spec.intermediate_size // tp.size
    if ".q_proj." in name:
        return full[tp.rank * num_q * dim:(tp.rank + 1) * num_q * dim]
    if ".k_proj." in name or ".v_proj." in name:
        return full[first_kv * dim:(first_kv + num_kv) * dim]
    if ".o_proj." in name:
        return full[:, tp.rank * num_q * dim:(tp.rank + 1) * num_q * dim]
    if ".gate_proj." in name or ".up_proj." in name:
        return full[tp.rank * inter:(tp.rank + 1) * inter]
    if ".down_proj." in name:
        return full[:, tp.rank * inter:(tp.rank + 1) * inter]
    if "embed_tokens." in name or name.startswith("lm_head."):
        return _vocab_shard(full, spec, tp)
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
