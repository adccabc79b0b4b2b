"""pydantic schemas for untrusted model files: Hugging Face config.json field names, verbatim."""

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# Strict: "32", 32.0 and true are not silently read as layer counts. Counts are >= 1 where a
# zero would be meaningless; fields where 0 means "none" (dense layers, shared experts) are >= 0.
Count = Annotated[int, Field(ge=1)]
Zero = Annotated[int, Field(ge=0)]
# defer_build: each validator is built when first used, so a YAML plan never builds HFConfig's
# or Serving's own (ModelFile holds both) and a config.json plan never builds ModelFile's.


class HFConfig(BaseModel):
    """The config.json fields the ledger reads. Anything else in a config.json is ignored."""

    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)

    architectures: list[str] | None = None
    model_type: str | None = None
    hidden_size: Count | None = None
    intermediate_size: Count | list[Count] | None = None  # Gemma-3n: one width per layer
    num_hidden_layers: Count | None = None
    num_attention_heads: Count | None = None
    num_key_value_heads: Count | None = None
    head_dim: Count | None = None
    vocab_size: Count | None = None
    tie_word_embeddings: bool | None = None
    max_position_embeddings: Count | None = None
    torch_dtype: str | None = None
    dtype: str | None = None
    sliding_window: Count | None = None
    use_sliding_window: bool | None = None
    max_window_layers: Zero | None = None
    layer_types: list[str] | None = None
    sliding_window_pattern: Count | str | None = None  # EXAONE-4: 'LLLG' (L local, G global)
    attention_bias: bool | None = None
    num_local_experts: Count | None = None
    num_experts: Count | None = None
    n_routed_experts: Count | None = None
    n_shared_experts: Zero | None = None
    num_experts_per_tok: Count | None = None
    moe_intermediate_size: Count | None = None
    shared_expert_intermediate_size: Zero | None = None
    first_k_dense_replace: Zero | None = None
    decoder_sparse_step: Count | None = None
    mlp_only_layers: list[Zero] | None = None
    q_lora_rank: Count | None = None
    kv_lora_rank: Count | None = None
    qk_rope_head_dim: Count | None = None
    qk_nope_head_dim: Count | None = None
    v_head_dim: Count | None = None
    num_nextn_predict_layers: Zero | None = None
    quantization_config: dict[str, Any] | None = None
    text_config: dict[str, Any] | None = None
    # M-RoPE's sections, lifted from rope_scaling / rope_parameters (config_read.prepare): vLLM
    # builds an MRotaryEmbedding for a config that states them
    mrope_section: list[Zero] | None = None
    # hybrids: gated DeltaNet (Qwen3-Next, Qwen3.5) and Mamba-2 (Nemotron-H)
    full_attention_interval: Count | None = None
    linear_num_key_heads: Count | None = None
    linear_num_value_heads: Count | None = None
    linear_key_head_dim: Count | None = None
    linear_value_head_dim: Count | None = None
    linear_conv_kernel_dim: Count | None = None
    attn_output_gate: bool | None = None
    hybrid_override_pattern: str | None = None
    mamba_num_heads: Count | None = None
    mamba_head_dim: Count | None = None
    n_groups: Count | None = None
    ssm_state_size: Count | None = None
    conv_kernel: Count | None = None
    mamba_ssm_cache_dtype: str | None = None
    mamba_ssm_dtype: str | None = None
    moe_shared_expert_intermediate_size: Zero | None = None
    moe_latent_size: Count | None = None  # Nemotron-3 latent MoE: experts' input/output width
    # Mamba-2 hybrids as Granite-4 (granitemoehybrid) and Falcon-H1 (falcon_h1) spell them
    mamba_n_heads: Count | None = None
    mamba_d_head: Count | str | None = None  # "auto": mamba intermediate / mamba_n_heads
    mamba_n_groups: Count | None = None
    mamba_d_state: Count | None = None
    mamba_d_conv: Count | None = None
    mamba_expand: Count | None = None
    mamba_d_ssm: Count | None = None  # Falcon-H1's mamba intermediate (else expand x hidden)
    mamba_conv_bias: bool | None = None
    mamba_proj_bias: bool | None = None
    mamba_rms_norm: bool | None = None
    projectors_bias: bool | None = None
    mlp_bias: bool | None = None
    shared_intermediate_size: Zero | None = None
    # chunked local attention, MoE interleaving (Llama-4)
    attention_chunk_size: Count | None = None
    interleave_moe_layer_step: Zero | None = None
    intermediate_size_mlp: Count | None = None
    use_qk_norm: bool | None = None
    # sparse MLA indexer (DeepSeek-V3.2, GLM-5)
    index_head_dim: Count | None = None
    index_n_heads: Count | None = None
    # per-layer-type shapes (Gemma-4), partial rotary (MiniMax)
    global_head_dim: Count | None = None
    num_global_key_value_heads: Count | None = None
    attention_k_eq_v: bool | None = None
    num_kv_shared_layers: Zero | None = None
    top_k_experts: Count | None = None
    enable_moe_block: bool | None = None
    rotary_dim: Count | None = None
    partial_rotary_factor: float | None = None
    mtp_num_hidden_layers: Zero | None = None
    # per-layer geometry (model_configs/families.py): DeciLM/NAS blocks, Gemma-3n/4 KV sharing
    # and per-layer embeddings, LFM2's short conv, MiMo-V2's SWA shapes, Laguna's heads
    block_configs: list[dict[str, Any]] | None = None
    hidden_size_per_layer_input: Zero | None = None
    vocab_size_per_layer_input: Count | None = None
    use_double_wide_mlp: bool | None = None
    conv_L_cache: Count | None = None
    conv_bias: bool | None = None
    conv_dim: Count | None = None
    block_multiple_of: Count | None = None
    block_auto_adjust_ff_dim: bool | None = None
    block_ffn_dim_multiplier: float | None = None
    swa_num_attention_heads: Count | None = None
    swa_num_key_value_heads: Count | None = None
    swa_head_dim: Count | None = None
    swa_v_head_dim: Count | None = None
    sliding_window_size: Count | None = None
    hybrid_layer_pattern: list[Zero] | None = None
    moe_layer_freq: list[Zero] | Zero | None = None
    add_swa_attention_sink_bias: bool | None = None
    add_full_attention_sink_bias: bool | None = None
    num_attention_heads_per_layer: list[Count] | None = None
    mlp_layer_types: list[str] | None = None
    gating: bool | str | None = None
    altup_num_inputs: Count | None = None  # Gemma-3n's AltUp streams
    laurel_rank: Count | None = None  # Gemma-3n's LAuReL low-rank residual
    qk_layernorm: bool | None = None  # Phi: q/k LayerNorms (vLLM's PhiForCausalLM has none)
    n_inner: Count | None = None  # Phi: the MLP width vLLM's PhiMLP reads (else 4 x hidden)


class Serving(BaseModel):
    """Deployment defaults a bundled config may carry (the seed's worked case does)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    device: str | None = None
    context: Count | None = None
    concurrency: Count | None = None
    runtime_peak: str | None = None
    safety: str | None = None
    block_size: Count | None = None


class ModelFile(HFConfig):
    """A servecap model YAML: config.json fields plus provenance. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    name: str
    source: str
    hf_id: str | None = None
    num_parameters: Count | None = None
    num_parameters_source: str | None = None
    weights_total_size_bytes: Count | None = None
    weights_total_size_source: str | None = None
    query_pre_attn_scalar: float | None = None
    notes: list[str] | None = None
    serving: Serving | None = None
