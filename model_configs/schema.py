"""pydantic schemas for untrusted model files: Hugging Face config.json field names, verbatim."""

from typing import Any

from pydantic import BaseModel, ConfigDict


class HFConfig(BaseModel):
    """The config.json fields the ledger reads. Anything else in a config.json is ignored."""

    model_config = ConfigDict(extra="ignore")

    architectures: list[str] | None = None
    model_type: str | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    vocab_size: int | None = None
    tie_word_embeddings: bool | None = None
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None
    dtype: str | None = None
    sliding_window: int | None = None
    use_sliding_window: bool | None = None
    max_window_layers: int | None = None
    layer_types: list[str] | None = None
    sliding_window_pattern: int | None = None
    attention_bias: bool | None = None
    num_local_experts: int | None = None
    num_experts: int | None = None
    n_routed_experts: int | None = None
    n_shared_experts: int | None = None
    num_experts_per_tok: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    first_k_dense_replace: int | None = None
    decoder_sparse_step: int | None = None
    mlp_only_layers: list[int] | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    num_nextn_predict_layers: int | None = None
    quantization_config: dict[str, Any] | None = None
    text_config: dict[str, Any] | None = None


class Serving(BaseModel):
    """Deployment defaults a bundled config may carry (the seed's worked case does)."""

    model_config = ConfigDict(extra="forbid")

    device: str | None = None
    context: int | None = None
    concurrency: int | None = None
    runtime_peak: str | None = None
    safety: str | None = None
    block_size: int | None = None


class ModelFile(HFConfig):
    """A servecap model YAML: config.json fields plus provenance. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")

    name: str
    source: str
    hf_id: str | None = None
    num_parameters: int | None = None
    num_parameters_source: str | None = None
    weights_total_size_bytes: int | None = None
    weights_total_size_source: str | None = None
    query_pre_attn_scalar: float | None = None
    notes: list[str] | None = None
    serving: Serving | None = None
