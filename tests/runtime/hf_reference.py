"""transformers' reference generation and the engine's logits, and the tiny hybrid checkpoints
transformers writes, for the parity and verify tests."""

import torch

from servecap.ledger.model import FULL, LINEAR, MAMBA, NONE, Attention, ModelSpec, StateShape

HYBRID_DIMS = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, vocab_size=256,
                   max_position_embeddings=256)
HYBRIDS = {  # model_type -> (transformers class, config class, config beyond HYBRID_DIMS)
    # Mamba-2, attention, MLP, Mamba-2, MLP; an 8-token SSD chunk in transformers
    "nemotron_h": ("NemotronHForCausalLM", "NemotronHConfig", dict(
        hybrid_override_pattern="M*-M-", mamba_num_heads=4, mamba_head_dim=16, n_groups=2,
        ssm_state_size=16, conv_kernel=4, chunk_size=8, num_nextn_predict_layers=0)),
    # gated DeltaNet and gated attention alternating; dense MLPs (mlp_only_layers)
    "qwen3_next": ("Qwen3NextForCausalLM", "Qwen3NextConfig", dict(
        num_hidden_layers=4, full_attention_interval=2, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
        linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32,
        mlp_only_layers=[0, 1, 2, 3])),
}


def save_hybrid(transformers, model_type: str, directory) -> str:
    """A seeded random tiny hybrid written by transformers' own save_pretrained; returns its
    transformers class name."""
    arch, config_class, extra = HYBRIDS[model_type]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**HYBRID_DIMS, **extra)
    getattr(transformers, arch)(config).float().save_pretrained(directory)
    return arch


@torch.inference_mode()
def hf_greedy(hf, prompt: list[int], num_output: int) -> tuple[list[int], torch.Tensor]:
    """transformers' cached generation, one sequence: tokens and the (N, V) logits behind them."""
    out = hf(torch.tensor([prompt]), use_cache=True)
    rows, tokens = [out.logits[0, -1]], [int(out.logits[0, -1].argmax())]
    while len(tokens) < num_output:
        out = hf(torch.tensor([tokens[-1:]]), cache=out.past_key_values, use_cache=True)
        rows.append(out.logits[0, -1])
        tokens.append(int(out.logits[0, -1].argmax()))
    return tokens, torch.stack(rows)


def engine_logits(engine, prompts, num_output: int, monkeypatch, staggered: bool = False):
    """The engine's records and, per request, the (N, V) logits rows its sampler was given.
    staggered: the first request finishes before the others arrive (they hit its prefix)."""
    from servecap.runtime import isolation as engine_module  # where the step calls it

    real = engine_module.forward_step
    seen: dict[int, list[torch.Tensor]] = {}

    def recording(*args):  # the real forward step; its logits are also kept per request
        logits, ready = real(*args)
        for row, seq in zip(logits, ready, strict=True):
            seen.setdefault(seq.record.request_id, []).append(row.clone())
        return logits, ready

    monkeypatch.setattr(engine_module, "forward_step", recording)
    records = []
    for group in ([prompts[:1], prompts[1:]] if staggered else [prompts]):
        records += [engine.add_request(p, num_output) for p in group]
        while engine.has_unfinished():
            engine.step()
    monkeypatch.undo()
    return records, [torch.stack(seen[r.request_id][-num_output:]) for r in records]


def hybrid_spec(model_type: str, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
                head_dim: int = 16, state_heads: int = 4, dims: tuple[int, int] = (16, 16),
                groups: int = 2, inter: int = 128, vocab: int = 256,
                kernel: int = 4) -> ModelSpec:
    """A Nemotron-H (Mamba-2, attention, MLP, Mamba-2, MLP blocks) or Qwen3-Next (gated
    DeltaNet and gated attention alternating) shape; dims: the recurrent state's two dims
    (Mamba-2 head_dim, d_state; DeltaNet v dim, k dim); groups: Mamba-2's B/C groups or
    DeltaNet's k heads."""
    a, b = dims
    if model_type == "nemotron_h":
        kinds = (MAMBA, FULL, NONE, MAMBA, NONE)
        state = StateShape(MAMBA, state_heads * a + 2 * groups * b, kernel, state_heads, dims,
                           "fp32", "fp32", groups, b, state_heads * a)
        att = Attention("gqa", heads, kv_heads, head_dim, layer_kinds=kinds)
        extra = dict(mlp_layers=(2, 4), gated_mlp=False, norms_per_layer=1)
    else:
        kinds = (LINEAR, FULL, LINEAR, FULL)
        state = StateShape(LINEAR, 2 * groups * b + state_heads * a, kernel, state_heads, dims,
                           "fp32", "fp32")
        att = Attention("gqa", heads, kv_heads, head_dim, qk_norm=True, q_gate=True,
                        layer_kinds=kinds)
        extra = {}
    return ModelSpec(name=f"tiny-{model_type}", source="test", num_layers=len(kinds),
                     attention=att, hidden_size=hidden, intermediate_size=inter,
                     vocab_size=vocab, model_type=model_type, state=state, **extra)
