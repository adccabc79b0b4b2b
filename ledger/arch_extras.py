"""Weight tensors of the newer families' own blocks: Gemma-3n/4's per-layer embeddings and LFM2's
gated short convolution, as their vLLM model classes build them (v0.21.0)."""

from .model import ModelSpec
from .tensors import EMBED, LINEAR, VECTOR, TensorGroup


def per_layer_input_tables(spec: ModelSpec) -> list[TensorGroup]:
    """Gemma4Model's per-layer embeddings (vllm/model_executor/models/gemma4.py):
    embed_tokens_per_layer (vocab_size_per_layer_input x L x w, a VocabParallelEmbedding),
    per_layer_model_projection (L x w rows from the hidden state) and its norm (w). They sit
    with the first pipeline stage, beside embed_tokens."""
    ple = spec.per_layer_input
    if ple is None:
        return []
    width = spec.num_layers * ple.width
    return [TensorGroup("embed_tokens_per_layer", ple.vocab_size, width, 1, EMBED),
            TensorGroup("per_layer_model_projection", width, spec.hidden_size, 1, LINEAR, (0,)),
            TensorGroup("per_layer_projection_norm", 1, ple.width, 1, VECTOR, (0,))]


def per_layer_input_gate(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """Each decoder layer's per_layer_input_gate (w x h), per_layer_projection (h x w), both
    replicated (ReplicatedLinear), and post_per_layer_input_norm (h)."""
    ple, h, at = spec.per_layer_input, spec.hidden_size, (layer,)
    if ple is None:
        return []
    return [TensorGroup("per_layer_input_gate", ple.width, h, 1, LINEAR, at),
            TensorGroup("per_layer_projection", h, ple.width, 1, LINEAR, at),
            TensorGroup("post_per_layer_input_norm", 1, h, 1, VECTOR, at)]


def altup_blocks(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """Gemma-3n's per-layer AltUp (n streams: correction_coefs n x n, prediction_coefs n^2 x n,
    modality_router n x h, router_norm and correct_output_scale h) and LAuReL (linear_left
    r x h, linear_right h x r, post_laurel_norm h), vllm/model_executor/models/gemma3n.py."""
    n, r, h, at = spec.altup_inputs, spec.laurel_rank, spec.hidden_size, (layer,)
    out = []
    if n:
        out += [TensorGroup("altup.coefs", 1, n * n + n * n * n, 1, VECTOR, at),
                TensorGroup("altup.modality_router", n, h, 1, LINEAR, at),
                TensorGroup("altup.norm_and_scale", 1, 2 * h, 1, VECTOR, at)]
    if r:
        out += [TensorGroup("laurel.linear_left", r, h, 1, LINEAR, at),
                TensorGroup("laurel.linear_right", h, r, 1, LINEAR, at),
                TensorGroup("laurel.post_laurel_norm", 1, h, 1, VECTOR, at)]
    return out


def altup_projections(spec: ModelSpec) -> list[TensorGroup]:
    """Gemma3nModel's altup_projections (after the embedding, first stage) and
    altup_unembed_projections (before the final norm, last stage): n - 1 of h x h each."""
    n, h = spec.altup_inputs, spec.hidden_size
    if n < 2:
        return []
    return [TensorGroup("altup_projections", h, h, n - 1, LINEAR, (0,)),
            TensorGroup("altup_unembed_projections", h, h, n - 1, LINEAR,
                        (spec.num_layers - 1,))]


def conv_mixer(spec: ModelSpec, layer: int) -> list[TensorGroup]:
    """LFM2's ShortConv (vllm/model_executor/layers/mamba/short_conv.py): in_proj (3 x conv_dim
    rows: B, C and x), a depthwise conv of conv_L_cache taps per channel, out_proj; a bias on
    each when conv_bias."""
    st, h, at = spec.state, spec.hidden_size, (layer,)
    dim, taps = st.conv_dim, st.conv_kernel
    out = [TensorGroup("conv.in_proj", 3 * dim, h, 1, LINEAR, at),
           TensorGroup("conv.conv", dim, taps, 1, VECTOR, at),
           TensorGroup("conv.out_proj", h, dim, 1, LINEAR, at)]
    if st.conv_bias:
        out.append(TensorGroup("conv.biases", 1, 3 * dim + dim + h, 1, VECTOR, at))
    return out
