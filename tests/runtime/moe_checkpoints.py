"""Tiny seeded MoE checkpoints written by transformers' own save_pretrained, for the parity and
verify tests: Mixtral, Qwen3-MoE, DeepSeek-V3 (MLA + MoE), Qwen3-Next (gated DeltaNet + MoE)
and gpt-oss (sinks + alternating windows + MoE), fp32 in their checkpoint layouts (per-expert
tensors; gpt-oss's stacked, interleaved gate/up, unquantized)."""

import torch

DIMS = dict(hidden_size=64, num_attention_heads=4, vocab_size=256, max_position_embeddings=256)
# model_type -> (transformers class, config class, config beyond DIMS)
MOE = {
    # 4 experts, top-2, renormalised softmax, every layer routed
    "mixtral": ("MixtralForCausalLM", "MixtralConfig", dict(
        num_hidden_layers=2, num_key_value_heads=2, head_dim=16, intermediate_size=32,
        num_local_experts=4, num_experts_per_tok=2)),
    # softmax without renormalisation; layer 0 dense (mlp_only_layers), q/k norms
    "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig", dict(
        num_hidden_layers=3, num_key_value_heads=2, head_dim=16, intermediate_size=96,
        moe_intermediate_size=32, num_experts=8, num_experts_per_tok=3, mlp_only_layers=[0])),
    # MLA (q and kv latents, interleaved yarn RoPE with mscale), sigmoid scores with the
    # correction bias, 4 groups of 2 experts (2 eligible), x 2.5, a shared expert, layer 0 dense
    "deepseek_v3": ("DeepseekV3ForCausalLM", "DeepseekV3Config", dict(
        num_hidden_layers=3, num_key_value_heads=4, intermediate_size=96,
        moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
        n_shared_experts=1, n_group=4, topk_group=2, first_k_dense_replace=1,
        kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16, num_nextn_predict_layers=0,
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                             original_max_position_embeddings=64, beta_fast=32,
                             beta_slow=1, mscale=1.0, mscale_all_dim=1.0))),
    # gated DeltaNet and gated attention alternating; softmax top-2 renormalised, a
    # sigmoid-gated shared expert; layer 2 keeps a dense MLP
    "qwen3_next": ("Qwen3NextForCausalLM", "Qwen3NextConfig", dict(
        num_hidden_layers=4, num_key_value_heads=2, head_dim=16, intermediate_size=96,
        full_attention_interval=2, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, mlp_only_layers=[2])),
    # sliding (8 tokens) and full layers alternating, sinks, q/k/v/o biases, a biased router
    # (top-k, then softmax), biased experts with a clamped SwiGLU whose limit bites
    "gpt_oss": ("GptOssForCausalLM", "GptOssConfig", dict(
        num_hidden_layers=2, num_key_value_heads=2, head_dim=16, intermediate_size=32,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=8, swiglu_limit=0.15)),
}
# tensors transformers initialises to a constant (zeros), made random so the test exercises
# them: name fragment -> standard deviation
RANDOMISED = {"e_score_correction_bias": 0.05, "sinks": 1.0, "_proj.bias": 0.02,
              "proj_bias": 0.02}


def save_moe(transformers, model_type: str, directory) -> str:
    """A seeded random tiny MoE model written by transformers; returns its class name."""
    arch, config_class, extra = MOE[model_type]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**DIMS, **extra)
    model = getattr(transformers, arch)(config).float()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            std = next((s for key, s in RANDOMISED.items() if key in name), None)
            if std is not None:
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * std)
    model.save_pretrained(directory)
    return arch
