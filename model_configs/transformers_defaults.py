"""Fields an official config.json leaves to its transformers config class: that class's
defaults, one table per model_type, read from the transformers release named with it."""

TRANSFORMERS_VERSION = "5.24.0"  # AutoConfig.for_model(model_type).to_dict(), the read fields

DEFAULTS: dict[str, dict[str, object]] = {
    "gemma3_text": {"attention_bias": False, "head_dim": 256, "hidden_size": 2304,
                    "intermediate_size": 9216, "max_position_embeddings": 131072,
                    "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
                    "sliding_window": 4096, "tie_word_embeddings": True, "vocab_size": 262208},
    "llama4_text": {"attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128,
                    "interleave_moe_layer_step": 1, "intermediate_size_mlp": 16384,
                    "num_experts_per_tok": 1, "num_local_experts": 16,
                    "tie_word_embeddings": False, "use_qk_norm": True, "vocab_size": 202048},
    "qwen3_next": {"attention_bias": False, "decoder_sparse_step": 1, "head_dim": 256,
                   "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                   "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                   "linear_value_head_dim": 128, "mlp_only_layers": [],
                   "full_attention_interval": 4, "tie_word_embeddings": False},
    "qwen3_5_text": {"attention_bias": False, "head_dim": 256, "linear_conv_kernel_dim": 4,
                     "linear_key_head_dim": 128, "linear_num_key_heads": 16,
                     "linear_num_value_heads": 32, "linear_value_head_dim": 128,
                     "full_attention_interval": 4, "tie_word_embeddings": False},
    "qwen3_5_moe_text": {"attention_bias": False, "head_dim": 256, "linear_conv_kernel_dim": 4,
                         "linear_key_head_dim": 128, "linear_num_key_heads": 16,
                         "linear_num_value_heads": 32, "linear_value_head_dim": 128,
                         "full_attention_interval": 4, "tie_word_embeddings": False},
    "nemotron_h": {"attention_bias": False, "conv_kernel": 4, "head_dim": 128,
                   "mamba_head_dim": 64, "n_groups": 8, "num_nextn_predict_layers": 0,
                   "ssm_state_size": 128, "tie_word_embeddings": False},
    "minimax_m2": {"tie_word_embeddings": False},
    "gemma4_text": {"attention_bias": False, "attention_k_eq_v": False,
                    "enable_moe_block": False, "num_kv_shared_layers": 0,
                    "tie_word_embeddings": True},
    "deepseek_v32": {"attention_bias": False, "index_head_dim": 128, "index_n_heads": 64,
                     "tie_word_embeddings": False},
    "glm_moe_dsa": {"attention_bias": False, "index_head_dim": 128, "index_n_heads": 32,
                    "tie_word_embeddings": False},
    "ministral3": {"head_dim": 128, "tie_word_embeddings": False},
    "granitemoehybrid": {"attention_bias": False, "mamba_conv_bias": True, "mamba_d_conv": 4,
                         "mamba_d_head": "auto", "mamba_d_state": 256, "mamba_expand": 2,
                         "mamba_n_groups": 1, "mamba_n_heads": 128, "mamba_proj_bias": False,
                         "num_experts_per_tok": 2, "num_local_experts": 8,
                         "shared_intermediate_size": 1024, "tie_word_embeddings": False},
    "falcon_h1": {"attention_bias": False, "mamba_conv_bias": True, "mamba_d_conv": 4,
                  "mamba_d_head": "auto", "mamba_d_ssm": 1024, "mamba_d_state": 256,
                  "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 128,
                  "mamba_proj_bias": False, "mamba_rms_norm": False, "mlp_bias": False,
                  "projectors_bias": False, "tie_word_embeddings": False},
    "exaone4": {"sliding_window_pattern": 4, "tie_word_embeddings": False},
    "olmo2": {"attention_bias": False, "tie_word_embeddings": False},
    "olmo3": {"attention_bias": False, "tie_word_embeddings": False},
    "lfm2": {"block_auto_adjust_ff_dim": True, "block_ffn_dim_multiplier": 1.0,
             "block_multiple_of": 256, "conv_L_cache": 3, "conv_bias": False,
             "tie_word_embeddings": True},
    "laguna": {"attention_bias": False, "gating": True, "head_dim": 128,
               "tie_word_embeddings": False},
    "mimo_v2_flash": {"attention_bias": False, "tie_word_embeddings": False},
    "granite": {"attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False},
    "phi": {"partial_rotary_factor": 0.5, "qk_layernorm": False, "tie_word_embeddings": False},
    "gemma3n_text": {"altup_num_inputs": 4, "attention_bias": False, "head_dim": 256,
                     "hidden_size_per_layer_input": 256, "laurel_rank": 64,
                     "num_kv_shared_layers": 15, "sliding_window": 512,
                     "tie_word_embeddings": True, "vocab_size_per_layer_input": 262144},
}
# keys whose explicit null the config class keeps (its default applies only when the key is
# absent): Falcon-H1's mamba_d_ssm null means mamba_expand x hidden_size, not 1024
NULL_KEPT: dict[str, frozenset[str]] = {"falcon_h1": frozenset({"mamba_d_ssm"})}


def with_defaults(model_type: str, data: dict) -> tuple[dict, tuple[str, ...]]:
    """`data` with the class defaults of `model_type` under the keys it omits (or sets null),
    and the names filled (the plan's notes say which came from transformers)."""
    table = DEFAULTS.get(model_type, {})
    kept = NULL_KEPT.get(model_type, frozenset())
    filled = tuple(k for k in table if data.get(k) is None and not (k in kept and k in data))
    return {**data, **{k: table[k] for k in filled}}, filled
