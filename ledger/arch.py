"""The tensor inventory of a decoder: every weight tensor's shape, from the architecture alone."""

from .arch_extras import (
    altup_blocks,
    altup_projections,
    conv_mixer,
    per_layer_input_gate,
    per_layer_input_tables,
)
from .model import CONV, NONE, STATE_KINDS, ModelSpec
from .tensors import EMBED, HEAD, LINEAR, VECTOR, TensorGroup

__all__ = ["EMBED", "HEAD", "LINEAR", "VECTOR", "TensorGroup", "inventory", "count_parameters",
           "active_parameters", "routed_layers"]

# families whose attention output projection has a bias whenever q/k/v do (vLLM's classes:
# gpt_oss.py, granitemoehybrid.py, falcon_h1.py, granite.py bias=attention_bias; phi.py dense)
O_PROJ_BIAS = frozenset({"gpt_oss", "granitemoehybrid", "falcon_h1", "granite", "phi"})


def inventory(spec: ModelSpec) -> list[TensorGroup]:
    """All weight tensors: embeddings, per-layer attention and MLP/MoE, norms, lm_head. A block
    a layer does without (DeciLM's no-op attention or feed-forward) takes its norm with it."""
    groups = [TensorGroup("embed_tokens", spec.vocab_size, spec.hidden_size, 1, EMBED)]
    norm_width = spec.hidden_size * (2 if spec.norm_bias else 1)  # LayerNorm: weight + bias
    groups += per_layer_input_tables(spec) + altup_projections(spec)
    for layer in range(spec.num_layers):
        shape = spec.layer_shapes[layer] if spec.layer_shapes else None
        ffn = (spec.mlp_layers is None or layer in spec.mlp_layers) and (
            shape is None or shape.intermediate > 0)
        groups += _mixer(spec, layer) + (_mlp(spec, layer) if ffn else [])
        groups += per_layer_input_gate(spec, layer) + altup_blocks(spec, layer)
        norms = spec.norms_per_layer - (shape is not None and not shape.attention) - (
            shape is not None and not shape.intermediate)
        groups.append(TensorGroup("layernorm", 1, norm_width, norms, VECTOR, (layer,)))
    groups.append(TensorGroup("norm", 1, norm_width, 1, VECTOR))
    if not spec.tie_word_embeddings:
        groups.append(TensorGroup("lm_head", spec.vocab_size, spec.hidden_size, 1, HEAD))
    if spec.lm_head_bias:
        groups.append(TensorGroup("lm_head.bias", 1, spec.vocab_size, 1, VECTOR))
    return groups


def _mixer(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """A layer's token mixer: attention, a linear-attention / Mamba-2 block, or none."""
    kind = spec.layer_kind(layer)
    if kind == CONV:
        return conv_mixer(spec, layer)
    if kind in STATE_KINDS:
        return _state_mixer(spec, layer)
    if spec.parallel_state:  # Falcon-H1: attention and a Mamba-2 mixer side by side
        return _attention(spec, layer) + _state_mixer(spec, layer)
    if kind == NONE or (spec.layer_shapes and not spec.layer_shapes[layer].attention):
        return []
    return _attention(spec, layer)


def _state_mixer(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """Gated DeltaNet: in_proj (q, k, v, z, b, a), conv1d, dt_bias, A_log, norm, out_proj.
    Mamba-2: in_proj (z, x, B, C, dt) [+ bias], conv1d [+ bias], dt_bias, A_log, D, the gated
    norm (Falcon-H1 only with mamba_rms_norm), out_proj [+ bias]."""
    st, h, at = spec.state, spec.hidden_size, (layer,)
    heads, (dv, _) = st.recurrent_heads, st.recurrent_shape
    if st.kind == "linear":
        rows = st.conv_dim + heads * dv + 2 * heads
        vectors = st.conv_dim * st.conv_kernel + 2 * heads + dv
    else:
        rows = 2 * st.intermediate + 2 * st.n_groups * st.d_state + heads
        vectors = (st.conv_dim * (st.conv_kernel + st.conv_bias) + 3 * heads
                   + st.intermediate * st.gated_norm + rows * st.in_proj_bias
                   + h * st.out_proj_bias)
    return [TensorGroup("mixer.in_proj", rows, h, 1, LINEAR, at),
            TensorGroup("mixer.out_proj", h, heads * dv, 1, LINEAR, at),
            TensorGroup("mixer.conv_and_norms", 1, vectors, 1, VECTOR, at)]


def _attention(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    att = spec.attention
    if att.kind == "mla":
        return _mla(spec, layer) + _indexer(spec, layer)
    h, at = spec.hidden_size, (layer,)
    shape = spec.shape_at(layer)
    head_dim, own_kv = shape.head_dim, shape.kv_source is None
    q_out, kv_out = shape.num_heads * head_dim, shape.num_kv_heads * head_dim
    v_out = shape.num_kv_heads * shape.v_head_dim
    out = [TensorGroup("self_attn.q_proj", q_out * (2 if att.q_gate else 1), h, 1, LINEAR, at)]
    if own_kv:  # a layer reading another's K and V has no projections of its own (Gemma-4)
        out += [TensorGroup("self_attn.k_proj", kv_out, h, 1, LINEAR, at),
                TensorGroup("self_attn.v_proj", v_out, h, 1, LINEAR, at)]
    out.append(TensorGroup("self_attn.o_proj", h, shape.num_heads * shape.v_head_dim, 1, LINEAR,
                           at))
    if own_kv and spec.model_type == "gemma4_text" and att.full_kv_heads and \
            head_dim == att.full_head_dim:
        out.pop(2)  # attention_k_eq_v: the full layers' K projection doubles as V
    if spec.model_type == "gemma4_text":
        out.append(TensorGroup("layer_scalar", 1, 1, 1, VECTOR, at))
    if att.qkv_bias:
        out.append(TensorGroup("self_attn.qkv_bias", 1, q_out + kv_out + v_out, 1, VECTOR, at))
    if att.qkv_bias and spec.model_type in O_PROJ_BIAS:
        out.append(TensorGroup("self_attn.o_proj.bias", 1, h, 1, VECTOR, at))
    if att.qk_norm:
        width = (q_out + kv_out * own_kv) if att.qk_norm_heads else head_dim * (1 + own_kv)
        out.append(TensorGroup("self_attn.qk_norm", 1, width, 1, VECTOR, at))
    if att.sinks or shape.sinks:
        out.append(TensorGroup("self_attn.sinks", 1, shape.num_heads, 1, VECTOR, at))
    if spec.head_gate:
        out.append(TensorGroup("self_attn.g_proj", shape.num_heads, h, 1, LINEAR, at))
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


def _indexer(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """DeepSeek-V3.2's indexer: wq_b (heads x dim from the q latent), wk, k_norm (weight and
    bias), weights_proj (one weight per head)."""
    att, h, at = spec.attention, spec.hidden_size, (layer,)
    dim, heads = att.indexer_head_dim, att.indexer_heads
    if not dim:
        return []
    return [TensorGroup("self_attn.indexer.wq_b", heads * dim, att.q_lora_rank or h, 1,
                        LINEAR, at),
            TensorGroup("self_attn.indexer.wk", dim, h, 1, LINEAR, at),
            TensorGroup("self_attn.indexer.weights_proj", heads, h, 1, LINEAR, at),
            TensorGroup("self_attn.indexer.k_norm", 1, 2 * dim, 1, VECTOR, at)]


def _mlp(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    moe, h, at = spec.moe, spec.hidden_size, (layer,)
    mats = 3 if spec.gated_mlp else 2
    if moe is None or layer in moe.dense_layers:
        width = spec.layer_shapes[layer].intermediate if spec.layer_shapes else \
            spec.intermediate_size
        bias = [TensorGroup("mlp.bias", 1, width * (mats - 1) + h, 1, VECTOR, at)] \
            if spec.mlp_bias else []  # gate / up biases (width each) and down's (hidden)
        return [TensorGroup("mlp.gate_up_down", width, h, mats, LINEAR, at)] + bias
    e, inter, width = moe.num_experts, moe.expert_intermediate_size, moe.expert_width(h)
    out = _gemma4_moe_extras(spec, layer) if spec.model_type == "gemma4_text" else []
    out += [TensorGroup("mlp.experts", inter, width, mats * e, LINEAR, at),
            TensorGroup("mlp.router", e, h, 1, LINEAR, at)]
    if moe.latent_size:  # vllm/model_executor/models/nemotron_h.py NemotronHMoE @v0.32.0
        out += [TensorGroup("mlp.fc1_latent_proj", width, h, 1, LINEAR, at),
                TensorGroup("mlp.fc2_latent_proj", h, width, 1, LINEAR, at)]
    if moe.router_bias:
        out.append(TensorGroup("mlp.router.bias", 1, e, 1, VECTOR, at))
    if moe.expert_bias:
        out.append(TensorGroup("mlp.experts.bias", 1, 2 * inter + h, e, VECTOR, at))
    if moe.num_shared_experts:
        shared = moe.shared_intermediate_size or inter * moe.num_shared_experts
        out.append(TensorGroup("mlp.shared_experts", shared, h, mats, LINEAR, at))
    if moe.shared_expert_gate:
        out.append(TensorGroup("mlp.shared_expert_gate", 1, h, 1, LINEAR, at))
    return out


def _gemma4_moe_extras(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """Gemma-4's MoE layers keep the dense MLP beside the experts, a router scale per hidden
    dim and per expert, and three more norms."""
    h, at, e = spec.hidden_size, (layer,), spec.moe.num_experts
    return [TensorGroup("mlp.gate_up_down", spec.intermediate_size, h, 3, LINEAR, at),
            TensorGroup("router.scales_and_norms", 1, h + e + 3 * h, 1, VECTOR, at)]


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
    per_expert = (3 if spec.gated_mlp else 2) * spec.moe.expert_intermediate_size * \
        spec.moe.expert_width(spec.hidden_size)
    return total - idle * per_expert * len(routed_layers(spec))


def routed_layers(spec: ModelSpec) -> tuple[int, ...]:
    """Layers whose feed-forward block routes to experts (a spec may state experts and keep
    every layer dense: mlp_only_layers, Nemotron-H without E blocks)."""
    if spec.moe is None:
        return ()
    with_mlp = range(spec.num_layers) if spec.mlp_layers is None else spec.mlp_layers
    return tuple(n for n in with_mlp if n not in spec.moe.dense_layers)
