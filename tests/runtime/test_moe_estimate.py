"""The runtime-peak bound holds for MoE models: on 100 random shapes of the five MoE families
(Mixtral, Qwen3-MoE, DeepSeek-V3 with latent attention, Qwen3-Next, gpt-oss with sinks and
windows) the measured peak of the widest prefill chunk and decode is <= the bound <= 1.25 x the
measured, the router logits, the permutation and combine buffers and the experts'
intermediates included; fp32 on the CPU allocator (see test_runtime_estimate.py)."""

from dataclasses import replace

from hf_reference import hybrid_spec
from hypothesis import given, settings
from hypothesis import strategies as st
from peak_bound import check_bound

from servecap.ledger.model import FULL, SLIDING, Attention, ModelSpec, MoE
from servecap.runtime.model import DecoderOptions, with_num_layers
from servecap.runtime.moe import family_options

FAMILIES = ("mixtral", "qwen3_moe", "deepseek_v3", "qwen3_next", "gpt_oss")


@st.composite
def moe_shapes(draw):
    """A family's layer layout at widths where the experts' rows, the router or the
    attention may each be the widest phase."""
    family = draw(st.sampled_from(FAMILIES))
    hidden = draw(st.sampled_from([32, 64]))
    experts = draw(st.sampled_from([4, 8, 16]))
    moe = MoE(experts, draw(st.integers(2, min(6, experts))),
              draw(st.sampled_from([128, 256, 512])),
              router_bias=family in ("deepseek_v3", "gpt_oss"),
              expert_bias=family == "gpt_oss",
              dense_layers=(0,) if family == "deepseek_v3" else ())
    if family in ("deepseek_v3", "qwen3_next"):
        moe = replace(moe, num_shared_experts=1, shared_expert_gate=family == "qwen3_next",
                      shared_intermediate_size=draw(st.sampled_from([0, 96])))
    spec = _attention(draw, family, hidden)
    return replace(spec, moe=moe, hidden_size=hidden, vocab_size=draw(st.sampled_from([128, 500])),
                   intermediate_size=draw(st.sampled_from([64, 192])))


def _attention(draw, family: str, hidden: int) -> ModelSpec:
    if family == "qwen3_next":  # a gated-DeltaNet layer, then gated attention
        return with_num_layers(hybrid_spec("qwen3_next", hidden=hidden, heads=8, kv_heads=1), 2)
    heads = 8
    layers, kinds = 2, ()
    if family == "deepseek_v3":
        att = Attention("mla", heads, heads, 24, q_lora_rank=draw(st.sampled_from([None, 32])),
                        kv_lora_rank=draw(st.sampled_from([16, 32])), qk_rope_head_dim=8,
                        qk_nope_head_dim=16, v_head_dim=draw(st.sampled_from([16, 32])))
        layers = 2  # layer 0 dense (first_k_dense_replace), then routed
    else:
        kinds = (SLIDING, FULL) if family == "gpt_oss" else ()
        att = Attention("gqa", heads, 1, 16,
                        qkv_bias=family == "gpt_oss", qk_norm=family == "qwen3_moe",
                        sinks=family == "gpt_oss", layer_kinds=kinds,
                        sliding_window_tokens=8 if kinds else None)
    return ModelSpec(name=f"prop-{family}", source="test", num_layers=layers, attention=att,
                     model_type=family)


@settings(max_examples=100, derandomize=True, deadline=None, database=None)
@given(spec=moe_shapes(), tokens=st.sampled_from([96, 192, 384]), seqs=st.integers(1, 16),
       block=st.sampled_from([4, 16]))
def test_estimate_bounds_the_measured_peak_of_moe(spec, tokens, seqs, block) -> None:
    check_bound(spec, "fp32", "fp32", tokens, seqs, block,
                DecoderOptions(moe=_routing(spec)))


def _routing(spec: ModelSpec):
    """The family's routing; DeepSeek-V3's groups sized to these few experts (2 per group)."""
    opts = family_options(spec.model_type)
    if spec.model_type != "deepseek_v3":
        return opts
    groups = spec.moe.num_experts // 2
    chosen = max(1, -(-spec.moe.num_experts_per_tok // 2))
    return replace(opts, routing=replace(opts.routing, n_group=groups, topk_group=chosen))
