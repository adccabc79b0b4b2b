"""Buffers a vLLM model class allocates when it is built, so 'Model loading took' counts them
with the weights: the rotary cos/sin cache (larger for M-RoPE) and Qwen3-VL's deepstack input
buffers. Each rule cites the class at the release read.

- M-RoPE: MRotaryEmbedding enlarges the cache to max_position_embeddings x 4 ('In Qwen2.5-VL,
  the maximum index value is related to the duration of the input video'; cache_max_position_num
  in vllm/model_executor/layers/rotary_embedding.py at v0.8.0-v0.9.2, rotary_embedding/mrope.py
  at v0.10.2-v0.28.0). v0.7.1's MRotaryEmbedding keeps max_position_embeddings. At v0.33.0 the
  factor is a parameter (positions_factor, default 4) and Qwen3-VL's and Qwen3.5's decoder
  layers pass 1 unless video pruning is on (vllm/model_executor/models/qwen3_vl.py
  mrope_positions_factor, used by qwen3_vl_moe.py and qwen3_5.py);
  the 0.29-0.32 rows take the 0.28 rule (not read). vllm-project/vllm#44738 (closed) measures
  the same cache: 'Qwen3-VL saves 224MB' when clamped to --max-model-len 32768, i.e.
  262,144 x 4 x 128 x 2 B = 256 MiB against 32 MiB.
- Deepstack: Qwen3-VL's model class keeps one zeroed (max_num_batched_tokens x text hidden)
  tensor per deepstack level in the model dtype whenever it builds the vision tower
  (deepstack_input_embeds in Qwen3VLForConditionalGeneration / Qwen3VLMoeForConditionalGeneration
  __init__, vllm/model_executor/models/qwen3_vl.py and qwen3_vl_moe.py, v0.11.0 to v0.33.0)."""

from .model import ModelSpec
from .vllm_row import VllmRow

MROPE_FACTOR = 4
MROPE_FROM = (0, 8, 0)  # the first release whose MRotaryEmbedding enlarges the cache
QWEN3_VL = frozenset({"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"})
# the classes whose decoder layers pass mrope_positions_factor at v0.33.0 (qwen3_vl.py,
# qwen3_vl_moe.py, qwen3_5.py): 1 without video pruning
FACTOR_ONE_CLASSES = QWEN3_VL | {"Qwen3_5ForConditionalGeneration",
                                 "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForCausalLM",
                                 "Qwen3_5MoeForCausalLM"}
QWEN3_VL_FACTOR_ONE = (0, 33, 0)
DEEPSTACK_FROM = (0, 11, 0)  # Qwen3-VL's first release


def rotary_positions(spec: ModelSpec, row: VllmRow | None) -> tuple[int, str]:
    """(positions the rotary cache holds, why): max_position_embeddings, x 4 for M-RoPE on the
    releases that enlarge it."""
    positions = spec.max_position_embeddings
    if not spec.mrope or row is None or row.version < MROPE_FROM:
        return positions, ""
    if spec.architecture in FACTOR_ONE_CLASSES and row.version >= QWEN3_VL_FACTOR_ONE:
        return positions, f" (M-RoPE: {spec.architecture} passes positions_factor 1 at {row.tag})"
    return positions * MROPE_FACTOR, (f" (M-RoPE: {spec.max_position_embeddings:,} x "
                                      f"{MROPE_FACTOR}, MRotaryEmbedding at {row.tag})")


def deepstack_bytes(spec: ModelSpec, row: VllmRow | None, batched_tokens: int,
                    dtype_bytes: int) -> tuple[int, str]:
    """(bytes, why) of Qwen3-VL's deepstack input buffers on each rank (not split by TP)."""
    enc = spec.encoder
    if enc is None or not enc.deepstack_levels or row is None or row.version < DEEPSTACK_FROM \
            or spec.architecture not in QWEN3_VL:
        return 0, ""
    size = enc.deepstack_levels * batched_tokens * spec.hidden_size * dtype_bytes
    return size, (f"; + deepstack input buffers {enc.deepstack_levels} x {batched_tokens:,} "
                  f"batched tokens x {spec.hidden_size:,} x {dtype_bytes} B = {size:,} B, "
                  "allocated with the model (qwen3_vl.py deepstack_input_embeds)")
