"""The vision encoder vLLM loads beside a multimodal model's language model, and its weights
on one rank: the tower and the projector into the language model's hidden size, in the model
dtype. Two towers are read, each as vLLM v0.19.0 builds it:

- SIGLIP: Gemma3ForConditionalGeneration's SiglipVisionModel
  (vllm/model_executor/models/gemma3_mm.py, siglip.py): a Conv2d patch embedding with bias,
  (image_size / patch_size)^2 learned positions, per layer two LayerNorms (weight and bias),
  qkv_proj (QKVParallelLinear, bias) and out_proj (RowParallelLinear, bias), fc1
  (ColumnParallelLinear, bias) and fc2 (RowParallelLinear, bias), split over tensor-parallel
  ranks; post_layernorm; no pooling head (vision_use_head false). Gemma3MultiModalProjector:
  mm_input_projection_weight (vision hidden x text hidden) and mm_soft_emb_norm (vision hidden).
- GEMMA4_VISION: Gemma4ForConditionalGeneration builds transformers' Gemma4VisionModel with
  AutoModel.from_config (vllm/model_executor/models/gemma4_mm.py), whole on every rank:
  a (2, position_embedding_size, hidden) position table, input_proj (hidden x 3 patch^2),
  per layer q/k/v/o without bias, q_norm and k_norm (head_dim), gate/up/down, four RMSNorms;
  std_bias and std_scale buffers when it standardizes. Gemma4MultimodalEmbedder:
  embedding_projection (vision hidden x text hidden, ReplicatedLinear).
- LLAMA4_VISION: Llama4ForConditionalGeneration's Llama4VisionModel
  (vllm/model_executor/models/mllama4.py): the patch embedding as a linear layer without bias
  (ColumnParallelLinear, channels x patch^2 x hidden), a class embedding and
  (image_size / patch)^2 + 1 learned positions, layernorm_pre and layernorm_post, per layer
  qkv_proj (QKVParallelLinear, bias), o_proj (RowParallelLinear, bias), fc1 (column, bias), fc2
  (row, bias) and two LayerNorms; the pixel-shuffle adapter's fc1 (intermediate_size x
  projector_input_dim, column) and fc2 (projector_input_dim x projector_output_dim, row),
  biased by multi_modal_projector_bias; Llama4MultiModalProjector linear_1 (vision_output_dim x
  text hidden, column, no bias). --mm-encoder-tp-mode weights (the default) splits the linear
  layers over tensor-parallel ranks as SIGLIP's are.
- QWEN3_VISION: Qwen3VLForConditionalGeneration's and Qwen3VLMoeForConditionalGeneration's
  Qwen3_VisionTransformer (vllm/model_executor/models/qwen3_vl.py, qwen2_5_vl.py
  Qwen2_5_VisionAttention; the same modules at v0.11.0): a Conv3d patch embedding with bias
  (channels x temporal_patch x patch^2 x hidden), num_position_embeddings learned positions,
  per block two LayerNorms, qkv (QKVParallelLinear, bias) and proj (RowParallelLinear, bias),
  linear_fc1 (column, bias) and linear_fc2 (row, bias); the merger and one merger per deepstack
  level, each a LayerNorm (hidden, or hidden x merge^2 after the shuffle for the deepstack
  ones), linear_fc1 (hidden x merge^2 square, column, bias) and linear_fc2 (to out_hidden_size,
  row, bias). --mm-encoder-tp-mode weights splits the linear layers as SIGLIP's are.
"""

from dataclasses import dataclass

from .lines import Line

SIGLIP, GEMMA4_VISION, LLAMA4_VISION = "siglip", "gemma4_vision", "llama4_vision"
QWEN3_VISION = "qwen3_vision"
CLASSES = {SIGLIP: "SiglipVisionModel (vllm/model_executor/models/siglip.py)",
           QWEN3_VISION: "Qwen3_VisionTransformer (vllm/model_executor/models/qwen3_vl.py)",
           GEMMA4_VISION: "transformers' Gemma4VisionModel (AutoModel.from_config)",
           LLAMA4_VISION: "Llama4VisionModel (vllm/model_executor/models/mllama4.py)"}


@dataclass(frozen=True)
class Encoder:
    """A vision tower's shape as its config states it, and the text hidden size it projects
    to. positions: SIGLIP's learned positions; GEMMA4_VISION's position_embedding_size."""

    kind: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    patch_size: int
    channels: int
    positions: int
    text_hidden_size: int
    standardize: bool = False
    # LLAMA4_VISION: projector_input_dim, projector_output_dim, vision_output_dim, and whether
    # the adapter's layers carry biases (multi_modal_projector_bias)
    adapter: tuple[int, int, int] = (0, 0, 0)
    adapter_bias: bool = False
    # QWEN3_VISION: spatial_merge_size, temporal_patch_size and the deepstack mergers' count
    merge_size: int = 1
    temporal_patch_size: int = 1
    deepstack_levels: int = 0


def encoder_params(enc: Encoder, tp: int = 1) -> tuple[int, int]:
    """(parameters on one of tp ranks, of which split over the ranks in whole) for the tower
    and its projector; SIGLIP's linear layers split over tp (weights and column biases), the
    rest whole on every rank."""
    h, i, layers = enc.hidden_size, enc.intermediate_size, enc.num_layers
    if enc.kind == SIGLIP:
        split = layers * (3 * h * h + 3 * h + h * h + h * i + i + i * h)
        whole = (layers * (4 * h + h + h) + enc.channels * enc.patch_size ** 2 * h + h
                 + enc.positions * h + 2 * h + h * enc.text_hidden_size + h)
        return whole + -(-split // tp), split
    if enc.kind == LLAMA4_VISION:
        p_in, p_out, v_out = enc.adapter
        b = 1 if enc.adapter_bias else 0
        split = (layers * (3 * h * h + 3 * h + h * h + h * i + i + i * h)
                 + enc.channels * enc.patch_size ** 2 * h
                 + i * p_in + b * p_in + p_in * p_out + v_out * enc.text_hidden_size)
        whole = layers * (4 * h + h + h) + h + enc.positions * h + 4 * h + b * p_out
        return whole + -(-split // tp), split
    if enc.kind == QWEN3_VISION:
        wide, out, mergers = h * enc.merge_size ** 2, enc.text_hidden_size, \
            1 + enc.deepstack_levels
        split = (layers * (3 * h * h + 3 * h + h * h + h * i + i + i * h)
                 + mergers * (wide * wide + wide + wide * out))
        whole = (layers * (4 * h + h + h)
                 + enc.channels * enc.temporal_patch_size * enc.patch_size ** 2 * h + h
                 + enc.positions * h + 2 * h + enc.deepstack_levels * 2 * wide
                 + mergers * out)
        return whole + -(-split // tp), split
    q, kv = enc.num_heads * enc.head_dim, enc.num_kv_heads * enc.head_dim
    per_layer = 2 * h * q + 2 * h * kv + 2 * enc.head_dim + 3 * h * i + 4 * h
    whole = (2 * enc.positions * h + h * enc.channels * enc.patch_size ** 2
             + layers * per_layer + (2 * h if enc.standardize else 0)
             + h * enc.text_hidden_size)
    return whole, 0


def encoder_line(enc: Encoder, tp: int, bits: int, data_parallel: bool = False) -> Line:
    """The encoder weights line: the tower and projector on one rank in the model dtype (tp 1
    with data_parallel: --mm-encoder-tp-mode data keeps the tower whole on every rank)."""
    params, split = encoder_params(enc, tp)
    shared = f", its {split:,} linear parameters split over tp={tp}" if tp > 1 and split else ""
    if data_parallel:
        shared = ", whole on every rank (--mm-encoder-tp-mode data: replicated linear layers)"
    return Line("encoder_weights", "vision encoder weights", params * bits // 8,
                f"vLLM loads {CLASSES[enc.kind]} and its projector: {params:,} params on this "
                f"rank x {bits} bits{shared} (vllm/model_executor/models at v0.19.0)")
