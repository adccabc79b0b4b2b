"""Which weight tensors one rank holds: tensor-parallel shards and pipeline-parallel stages."""

from dataclasses import dataclass, replace

from .arch import EMBED, HEAD, TensorGroup, inventory
from .errors import SpecError
from .experts import ExpertSplit
from .model import ModelSpec
from .state import state_shapes

VOCAB_PADDING = 64  # vLLM pads the vocabulary to a multiple of 64 before splitting it

# How each module splits under tensor parallelism (Megatron/vLLM layers):
# 'rows': column-parallel, output rows split; 'cols': row-parallel, input columns split;
# 'kv': K/V projections, split by KV head (replicated when kv_heads < tp); 'vocab': split by
# padded vocabulary ('vocab_bias': lm_head's bias the same way); 'heads': one value per query
# head; 'mlp_bias': the gate/up biases split, down's kept whole; anything else is replicated.
SPLIT = {
    "self_attn.q_proj": "rows", "self_attn.q_b_proj": "rows", "self_attn.kv_b_proj": "rows",
    "self_attn.k_proj": "kv", "self_attn.v_proj": "kv", "self_attn.qkv_bias": "qkv",
    "self_attn.o_proj": "cols", "self_attn.sinks": "heads",
    "mlp.gate_up_down": "mlp", "mlp.experts": "mlp", "mlp.shared_experts": "mlp",
    "mlp.experts.bias": "expert_bias", "embed_tokens": "vocab", "lm_head": "vocab",
    "self_attn.g_proj": "rows", "embed_tokens_per_layer": "vocab",
    "per_layer_model_projection": "rows", "conv.in_proj": "rows", "conv.conv": "rows",
    "conv.out_proj": "cols", "laurel.linear_left": "rows", "laurel.linear_right": "cols",
    "mixer.in_proj": "state", "mixer.out_proj": "state", "mixer.conv_and_norms": "state",
    "mlp.bias": "mlp_bias", "lm_head.bias": "vocab_bias",
}


EXPERT_GROUPS = ("mlp.experts", "mlp.experts.bias")


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its decoder layers, and whether it holds the embedding / lm_head."""

    index: int
    layers: tuple[int, ...]
    first: bool
    last: bool


def pp_partition(num_layers: int, pipeline_parallel_size: int) -> tuple[int, ...]:
    """Layers per stage, as vLLM's get_pp_indices splits them by default
    (vllm/distributed/utils.py): L // pp each; the L % pp leftover layers go one each to the
    stages just before the last (the last stage holds the final norm and lm_head)."""
    if pipeline_parallel_size > num_layers:
        raise SpecError("--pipeline-parallel-size", pipeline_parallel_size,
                        f"at most the model's {num_layers} layers")
    parts = [num_layers // pipeline_parallel_size] * pipeline_parallel_size
    for i in range(2, num_layers % pipeline_parallel_size + 2):
        parts[-i] += 1
    return tuple(parts)


def stages(num_layers: int, pipeline_parallel_size: int) -> tuple[Stage, ...]:
    """The stages with their layer ids; stage 0 embeds, the last stage projects to logits."""
    out, start = [], 0
    parts = pp_partition(num_layers, pipeline_parallel_size)
    for index, count in enumerate(parts):
        out.append(Stage(index, tuple(range(start, start + count)), index == 0,
                         index == len(parts) - 1))
        start += count
    return tuple(out)


def check_tensor_parallel(spec: ModelSpec, tp: int, experts: ExpertSplit | None = None) -> None:
    """vLLM's rules: query heads divide by tp; KV heads divide by tp, or tp by KV heads (then
    each KV head is replicated); the MLP width divides by tp; the routed experts split as
    `experts` says (ExpertSplit.check; default: their width by tp, as the MLP's)."""
    if tp < 1:
        raise SpecError("--tensor-parallel-size", tp, "must be a whole number >= 1")
    att = spec.attention
    for heads, kv in _head_counts(spec):
        if heads % tp:
            raise SpecError("--tensor-parallel-size", tp, f"must divide the {heads} query "
                            f"heads of {spec.name} (allowed: {_divisors(heads)})")
        if att.kind != "mla" and (kv % tp if kv >= tp else tp % kv):
            raise SpecError("--tensor-parallel-size", tp, f"must divide, or be a multiple of, "
                            f"the {kv} KV heads of {spec.name}")
    split = experts or ExpertSplit(tp)
    routed = spec.moe is not None and split.devices != tp or split.expert_parallel
    for width in _mlp_widths(spec, routed):
        if width % tp:
            raise SpecError("--tensor-parallel-size", tp, f"must divide the MLP width {width} "
                            f"of {spec.name}")
    if routed:
        split.check(spec.moe.num_experts, spec.moe.expert_intermediate_size, spec.name)


def rank_inventory(spec: ModelSpec, tp: int, stage: Stage | None = None,
                   experts: ExpertSplit | None = None) -> list[TensorGroup]:
    """The tensors one rank holds: its stage's layers (all when stage is None), the embedding on
    the first stage (and on the last when tied, as lm_head), the final norm and lm_head on the
    last, every tensor cut to this rank's tensor-parallel shard; the routed experts as
    `experts` splits them (default: over the tp ranks, each expert's width)."""
    groups = inventory(spec)
    if stage is not None:
        groups = [g for g in groups if _on_stage(g, stage)]
        if tied_head_copy(spec, stage):
            groups.append(TensorGroup("lm_head", spec.vocab_size, spec.hidden_size, 1, HEAD))
    split = experts or ExpertSplit(tp)
    return [split.shard(g, spec.moe.num_experts, spec.hidden_size)
            if g.name in EXPERT_GROUPS and spec.moe is not None and split.devices > 1
            else shard_group(spec, g, tp) for g in groups]


def shard_group(spec: ModelSpec, group: TensorGroup, tp: int) -> TensorGroup:
    """One tensor group cut to a rank's share (see SPLIT)."""
    how = SPLIT.get(group.name, "replicated")
    if tp == 1 or how == "replicated":
        return group
    if how == "state":
        return _state_share(spec, group, tp)
    if how in ("rows", "mlp"):
        return replace(group, rows=group.rows // tp)
    if how == "cols":
        return replace(group, cols=group.cols // tp)
    if how in ("kv", "qkv"):
        return _kv_share(spec, group, tp)
    if how == "heads":
        return replace(group, cols=group.cols // tp)
    if how in ("expert_bias", "mlp_bias"):  # gate/up biases split, down's whole on each rank
        return replace(group, cols=(group.cols - spec.hidden_size) // tp + spec.hidden_size)
    if how == "vocab_bias":
        return replace(group, cols=vocab_rows_per_rank(group.cols, tp))
    return replace(group, rows=vocab_rows_per_rank(group.rows, tp))


def vocab_rows_per_rank(vocab_size: int, tp: int) -> int:
    """Embedding / lm_head rows one rank holds: the vocabulary padded to a multiple of 64, split
    evenly (vLLM's VocabParallelEmbedding); the padding rows are zeros."""
    padded = -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    return padded // tp


def _kv_share(spec: ModelSpec, group: TensorGroup, tp: int) -> TensorGroup:
    """K or V projection rows (or the q/k/v bias) of the group's layer on one rank: its KV
    heads split, each replicated when H_kv < tp (QKVParallelLinear), at its own K/V sizes."""
    shape = spec.shape_at(group.layers[0] if group.layers else 0)
    kv = -(-shape.num_kv_heads // tp)
    if group.name == "self_attn.k_proj":
        return replace(group, rows=kv * shape.head_dim)
    if group.name == "self_attn.v_proj":
        return replace(group, rows=kv * shape.v_head_dim)
    return replace(group, cols=shape.num_heads // tp * shape.head_dim
                   + kv * (shape.head_dim + shape.v_head_dim))


def _on_stage(group: TensorGroup, stage: Stage) -> bool:
    if group.kind == EMBED:
        return stage.first
    if group.kind == HEAD or group.name in ("norm", "lm_head.bias"):
        return stage.last
    return not group.layers or group.layers[0] in stage.layers


def tied_head_copy(spec: ModelSpec, stage: Stage) -> bool:
    """A tied model's last stage (when it is not also the first) holds its own copy of the
    embedding as lm_head (vLLM builds embed_tokens there too)."""
    return spec.tie_word_embeddings and stage.last and not stage.first


def _head_counts(spec: ModelSpec) -> list[tuple[int, int]]:
    """(query heads, KV heads) of every distinct attention layer shape."""
    att = spec.attention
    if not spec.layer_shapes:
        return [(att.num_heads, att.num_kv_heads)]
    return sorted({(s.num_heads, s.num_kv_heads) for s in spec.layer_shapes if s.attention})


def _mlp_widths(spec: ModelSpec, routed_apart: bool = False) -> set[int]:
    """Widths split by tp: the dense MLPs', the shared experts' and (unless they split their
    own way) the routed experts'."""
    widths = {spec.intermediate_size} if spec.intermediate_size else set()
    widths |= {s.intermediate for s in spec.layer_shapes if s.intermediate}
    if spec.moe is not None:
        if not routed_apart:
            widths.add(spec.moe.expert_intermediate_size)
        if spec.moe.shared_intermediate_size:
            widths.add(spec.moe.shared_intermediate_size)
    return widths


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def rank_parameters(spec: ModelSpec, tp: int, stage: Stage | None = None) -> tuple[int, int]:
    """(parameters one rank holds, of which routed experts) from its shard of the inventory:
    what a step on that rank multiplies by (the simulator's per-rank FLOPs and expert reads)."""
    groups = rank_inventory(spec, tp, stage)
    return (sum(g.numel for g in groups),
            sum(g.numel for g in groups if g.name == "mlp.experts"))


def _state_share(spec: ModelSpec, group: TensorGroup, tp: int) -> TensorGroup:
    """A linear-attention or Mamba-2 mixer's share (ledger/arch.py _state_mixer's groups), as
    vLLM's layers split them: in_proj column-parallel, out_proj row-parallel, the conv, A_log,
    D, dt_bias and the gated norm by channel or head (vllm/model_executor/layers/mamba/
    mamba_mixer2.py MambaMixer2, models/qwen3_next.py Qwen3NextGatedDeltaNet at v0.11.0).
    Mamba-2's B/C groups are whole on every rank when n_groups % tp != 0
    (extra_groups_for_head_shards: tp groups, one a rank); GDN's norm over a head's value
    width and Mamba-2's out_proj bias are replicated."""
    st, h = spec.state, spec.hidden_size
    (_, conv_dim), (heads, dv, _) = state_shapes(st, tp)  # this rank's, groups as vLLM's
    if st.kind == "linear":
        rows = conv_dim + heads * dv + 2 * heads
        vectors = conv_dim * st.conv_kernel + 2 * heads + dv
    else:
        inner = st.intermediate // tp
        rows = inner + conv_dim + heads  # z, then x B C (the conv's channels), then dt
        vectors = (conv_dim * (st.conv_kernel + st.conv_bias) + 3 * heads
                   + inner * st.gated_norm + rows * st.in_proj_bias + h * st.out_proj_bias)
    if group.name == "mixer.in_proj":
        return replace(group, rows=rows)
    if group.name == "mixer.out_proj":
        return replace(group, cols=group.cols // tp)
    return replace(group, cols=vectors)
