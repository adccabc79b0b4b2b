"""The tensor inventory of a decoder: every weight tensor's shape, from the architecture alone."""

from dataclasses import dataclass

from .model import ModelSpec

EMBED = "embed"
HEAD = "lm_head"
LINEAR = "linear"  # a 2-D matmul weight: the thing quantization formats pack
VECTOR = "vector"  # norms, biases, sinks: kept in the checkpoint dtype


@dataclass(frozen=True)
class TensorGroup:
    """`count` tensors of shape (rows, cols); `name` follows Hugging Face module paths."""

    name: str
    rows: int
    cols: int
    count: int
    kind: str
    layers: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        return self.rows * self.cols * self.count


def inventory(spec: ModelSpec) -> list[TensorGroup]:
    """All weight tensors: embeddings, per-layer attention and MLP/MoE, norms, lm_head."""
    groups = [TensorGroup("embed_tokens", spec.vocab_size, spec.hidden_size, 1, EMBED)]
    for layer in range(spec.num_layers):
        groups += _attention(spec, layer) + _mlp(spec, layer)
        groups.append(TensorGroup("layernorm", 1, spec.hidden_size, spec.norms_per_layer, VECTOR,
                                  (layer,)))
    groups.append(TensorGroup("norm", 1, spec.hidden_size, 1, VECTOR))
    if not spec.tie_word_embeddings:
        groups.append(TensorGroup("lm_head", spec.vocab_size, spec.hidden_size, 1, HEAD))
    return groups


def _attention(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    att = spec.attention
    if att.kind == "mla":
        return _mla(spec, layer)
    h, at = spec.hidden_size, (layer,)
    q_out, kv_out = att.num_heads * att.head_dim, att.num_kv_heads * att.head_dim
    out = [
        TensorGroup("self_attn.q_proj", q_out, h, 1, LINEAR, at),
        TensorGroup("self_attn.k_proj", kv_out, h, 1, LINEAR, at),
        TensorGroup("self_attn.v_proj", kv_out, h, 1, LINEAR, at),
        TensorGroup("self_attn.o_proj", h, q_out, 1, LINEAR, at),
    ]
    if att.qkv_bias:
        out.append(TensorGroup("self_attn.qkv_bias", 1, q_out + 2 * kv_out, 1, VECTOR, at))
    if att.qkv_bias and spec.model_type == "gpt_oss":
        out.append(TensorGroup("self_attn.o_proj.bias", 1, h, 1, VECTOR, at))
    if att.qk_norm:
        out.append(TensorGroup("self_attn.qk_norm", 1, att.head_dim, 2, VECTOR, at))
    if att.sinks:
        out.append(TensorGroup("self_attn.sinks", 1, att.num_heads, 1, VECTOR, at))
    return out


def _mla(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """DeepSeek-V2/V3 multi-head latent attention projections."""
    att, h, at = spec.attention, spec.hidden_size, (layer,)
    qk_head = att.qk_nope_head_dim + att.qk_rope_head_dim
    out = []
    if att.q_lora_rank:
        out += [
            TensorGroup("self_attn.q_a_proj", att.q_lora_rank, h, 1, LINEAR, at),
            TensorGroup("self_attn.q_a_layernorm", 1, att.q_lora_rank, 1, VECTOR, at),
            TensorGroup("self_attn.q_b_proj", att.num_heads * qk_head, att.q_lora_rank, 1,
                        LINEAR, at),
        ]
    else:
        out.append(TensorGroup("self_attn.q_proj", att.num_heads * qk_head, h, 1, LINEAR, at))
    kv_b_out = att.num_heads * (att.qk_nope_head_dim + att.v_head_dim)
    return out + [
        TensorGroup("self_attn.kv_a_proj_with_mqa", att.kv_lora_rank + att.qk_rope_head_dim, h,
                    1, LINEAR, at),
        TensorGroup("self_attn.kv_a_layernorm", 1, att.kv_lora_rank, 1, VECTOR, at),
        TensorGroup("self_attn.kv_b_proj", kv_b_out, att.kv_lora_rank, 1, LINEAR, at),
        TensorGroup("self_attn.o_proj", h, att.num_heads * att.v_head_dim, 1, LINEAR, at),
    ]


def _mlp(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    moe, h, at = spec.moe, spec.hidden_size, (layer,)
    if moe is None or layer in moe.dense_layers:
        return [TensorGroup("mlp.gate_up_down", spec.intermediate_size, h, 3, LINEAR, at)]
    e, inter = moe.num_experts, moe.expert_intermediate_size
    out = [TensorGroup("mlp.experts", inter, h, 3 * e, LINEAR, at),
           TensorGroup("mlp.router", e, h, 1, LINEAR, at)]
    if moe.router_bias:
        out.append(TensorGroup("mlp.router.bias", 1, e, 1, VECTOR, at))
    if moe.expert_bias:
        out.append(TensorGroup("mlp.experts.bias", 1, 2 * inter + h, e, VECTOR, at))
    if moe.num_shared_experts:
        shared = moe.shared_intermediate_size or inter * moe.num_shared_experts
        out.append(TensorGroup("mlp.shared_experts", shared, h, 3, LINEAR, at))
    return out


def count_parameters(spec: ModelSpec) -> int:
    """Total parameters: the stated count when the config gives one, else the inventory's sum."""
    if spec.num_parameters is not None:
        return spec.num_parameters
    return sum(g.numel for g in inventory(spec))


def active_parameters(spec: ModelSpec) -> int:
    """Parameters one token computes with: all dense ones, and only its routed experts."""
    total = count_parameters(spec)
    if spec.moe is None or not spec.has_architecture:
        return total
    idle = spec.moe.num_experts - spec.moe.num_experts_per_tok
    per_expert = 3 * spec.moe.expert_intermediate_size * spec.hidden_size
    moe_layers = spec.num_layers - len(spec.moe.dense_layers)
    return total - idle * per_expert * moe_layers
