"""Each weight matrix under the module name its checkpoint stores it by ('layers.3.mlp.gate_proj',
'layers.0.linear_attn.in_proj_qkv', 'lm_head'), so a format's per-module rules can name it."""

from dataclasses import dataclass

from .arch import EMBED, HEAD, LINEAR, TensorGroup
from .model import ModelSpec

# The module names each family's checkpoints use (transformers' and vLLM's model classes):
# attention, dense MLP, routed experts (and their leaves), router, shared experts.
DEFAULT = {"attn": "self_attn", "mlp": "mlp", "experts": "mlp.experts",
           "leaves": ("gate_proj", "up_proj", "down_proj"), "router": "mlp.gate",
           "shared": "mlp.shared_experts", "state": "linear_attn",
           "mlp_leaves": ("gate_proj", "up_proj", "down_proj"), "o_proj": "o_proj"}
FAMILIES = {
    "nemotron_h": {"attn": "mixer", "mlp": "mixer", "experts": "mixer.experts",
                   "leaves": ("up_proj", "down_proj"), "router": "mixer.gate",
                   "shared": "mixer.shared_experts", "state": "mixer"},
    "mixtral": {"experts": "block_sparse_moe.experts", "leaves": ("w1", "w3", "w2"),
                "router": "block_sparse_moe.gate"},
    "minimax_m2": {"experts": "block_sparse_moe.experts", "leaves": ("w1", "w3", "w2"),
                   "router": "block_sparse_moe.gate"},
    "gpt_oss": {"leaves": ("gate_up_proj", "down_proj"), "router": "mlp.router"},
    "llama4_text": {"mlp": "feed_forward", "experts": "feed_forward.experts",
                    "router": "feed_forward.router", "shared": "feed_forward.shared_expert"},
    "qwen2_moe": {"shared": "mlp.shared_expert"},
    "qwen3_next": {"shared": "mlp.shared_expert"},
    "qwen3_5_moe_text": {"shared": "mlp.shared_expert"},
    "gemma4_text": {"experts": "experts", "router": "router.proj"},
    "granitemoehybrid": {"mlp": "shared_mlp", "experts": "block_sparse_moe.experts",
                         "router": "block_sparse_moe.router.layer", "state": "mamba"},
    "falcon_h1": {"mlp": "feed_forward", "state": "mamba"},
    "phi": {"mlp_leaves": ("fc1", "fc2"), "o_proj": "dense"},
}


@dataclass(frozen=True)
class ModuleTensor:
    """`count` matrices of (rows, cols) stored under `path` (experts: one path for all)."""

    path: str
    rows: int
    cols: int
    count: int
    kind: str


def names(spec: ModelSpec) -> dict:
    return {**DEFAULT, **FAMILIES.get(spec.model_type, {})}


def module_tensors(spec: ModelSpec, group: TensorGroup) -> list[ModuleTensor]:
    """The group's matrices, one entry per checkpoint module (a vector group is one entry)."""
    if group.kind == HEAD:
        return [ModuleTensor("lm_head", group.rows, group.cols, group.count, HEAD)]
    if group.kind == EMBED:
        return [ModuleTensor("embed_tokens", group.rows, group.cols, group.count, EMBED)]
    layer = f"layers.{group.layers[0]}." if group.layers else ""
    if group.kind != LINEAR:
        return [ModuleTensor(layer + group.name, group.rows, group.cols, group.count,
                             group.kind)]
    n = names(spec)
    parts = _split(spec, group, n)
    return [ModuleTensor(layer + path, rows, cols, count, LINEAR)
            for path, rows, cols, count in parts]


def _split(spec: ModelSpec, g: TensorGroup, n: dict) -> list[tuple[str, int, int, int]]:
    name = g.name
    if name.startswith("self_attn."):
        leaf = name.removeprefix("self_attn.")
        leaf = n["o_proj"] if leaf == "o_proj" else leaf
        return [(f"{n['attn']}.{leaf}", g.rows, g.cols, g.count)]
    if name == "mlp.gate_up_down":
        return _mlp(n["mlp"], g, gated=g.count % 3 == 0 and spec.gated_mlp,
                    leaves=n["mlp_leaves"])
    if name == "mlp.experts":
        return _experts(spec, n, g)
    if name == "mlp.shared_experts":
        return _mlp(n["shared"], g, gated=spec.gated_mlp)
    if name == "mlp.router":
        return [(n["router"], g.rows, g.cols, g.count)]
    if name.startswith("mlp.fc"):  # latent MoE projections
        return [(f"{n['mlp']}.{name.removeprefix('mlp.')}", g.rows, g.cols, g.count)]
    if name.startswith("mixer."):
        return _state(spec, n, g)
    return [(name, g.rows, g.cols, g.count)]


def _mlp(prefix: str, g: TensorGroup, gated: bool,
         leaves: tuple[str, ...] = DEFAULT["mlp_leaves"]) -> list[tuple[str, int, int, int]]:
    """gate/up (inter x hidden) and down (hidden x inter); up/down only when not gated (Phi's
    fc1/fc2)."""
    per = g.count // (3 if gated else 2)
    *ups, down = leaves
    ups = ups if gated else ups[-1:]
    return [(f"{prefix}.{leaf}", g.rows, g.cols, per) for leaf in ups] + \
        [(f"{prefix}.{down}", g.cols, g.rows, per)]


def _experts(spec: ModelSpec, n: dict, g: TensorGroup) -> list[tuple[str, int, int, int]]:
    """Every expert's matrices under expert 0's name; gpt-oss stores them fused per layer.
    The group holds this rank's experts: all of them, or under expert parallelism its share
    (ledger/experts.py), so each matrix counts the group's experts, not the model's."""
    leaves = n["leaves"]
    held = g.count // (3 if spec.gated_mlp else 2)
    if spec.model_type == "gpt_oss":
        return [(f"{n['experts']}.gate_up_proj", 2 * g.rows, g.cols, held),
                (f"{n['experts']}.down_proj", g.cols, g.rows, held)]
    *ups, down = leaves
    return [(f"{n['experts']}.0.{leaf}", g.rows, g.cols, held) for leaf in ups] + \
        [(f"{n['experts']}.0.{down}", g.cols, g.rows, held)]


def _state(spec: ModelSpec, n: dict, g: TensorGroup) -> list[tuple[str, int, int, int]]:
    """Gated DeltaNet's in_proj as its checkpoint splits it (Qwen3-Next: qkvz + ba; Qwen3.5:
    qkv, z, b, a); Mamba-2's in_proj and out_proj whole."""
    prefix, leaf = n["state"], g.name.removeprefix("mixer.")
    st = spec.state
    if leaf != "in_proj" or st is None or st.kind != "linear":
        return [(f"{prefix}.{leaf}", g.rows, g.cols, g.count)]
    heads, dv = st.recurrent_heads, st.recurrent_shape[0]
    whole = st.conv_dim + heads * dv + 2 * heads
    if whole % g.rows:  # not a whole in_proj nor an even tensor-parallel shard of one
        return [(f"{prefix}.{leaf}", g.rows, g.cols, g.count)]
    tp = whole // g.rows  # each part column-parallel: a tp-th of each on this rank
    if spec.model_type == "qwen3_next":
        return [(f"{prefix}.in_proj_qkvz", (st.conv_dim + heads * dv) // tp, g.cols, g.count),
                (f"{prefix}.in_proj_ba", 2 * heads // tp, g.cols, g.count)]
    return [(f"{prefix}.in_proj_qkv", st.conv_dim // tp, g.cols, g.count),
            (f"{prefix}.in_proj_z", heads * dv // tp, g.cols, g.count),
            (f"{prefix}.in_proj_b", heads // tp, g.cols, g.count),
            (f"{prefix}.in_proj_a", heads // tp, g.cols, g.count)]
