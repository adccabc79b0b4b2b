"""What the runtime builds, and a one-line refusal by name for everything it does not run."""

from servecap.ledger.arch import routed_layers
from servecap.ledger.errors import SpecError
from servecap.ledger.model import ATTENTION_KINDS, NONE, ModelSpec

from .router import FAMILY_DEFAULTS

# Llama-family decoders, the MoE families (Mixtral, Qwen3-MoE, DeepSeek-V3 with its latent
# attention, gpt-oss with its sinks), and the two hybrid families the runtime runs: Qwen3-Next
# (gated DeltaNet + gated attention, MoE) and Nemotron-H (Mamba-2 + attention + MLP blocks)
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe",
                         "deepseek_v3", "gpt_oss", "qwen3_next", "nemotron_h")
HYBRID_TYPES = ("qwen3_next", "nemotron_h")
# each kind the ledger plans and the runtime does not run yet, with the reason named
UNRUN_KINDS = {
    "chunked": "chunked local attention (Llama-4)",
}
OWN_KINDS = {"linear": ("qwen3_next",), "mamba": ("nemotron_h",), NONE: ("nemotron_h",)}


def check_buildable(spec: ModelSpec) -> None:
    """Fail closed on what this runtime cannot build rather than approximating it."""
    if not spec.has_architecture:
        raise SpecError("model", spec.name, "the runtime needs the full architecture "
                        "(hidden_size, intermediate_size, vocab_size, model_type)")
    _refuse_kinds(spec)
    _refuse_attention(spec)
    if routed_layers(spec) and spec.model_type not in FAMILY_DEFAULTS:
        raise SpecError("moe", spec.moe.num_experts, "the runtime routes experts as "
                        f"{', '.join(FAMILY_DEFAULTS)} define it, not {spec.model_type}'s "
                        f"(layers {routed_layers(spec)[:4]} route to experts); plan it with "
                        "servecap plan")
    if spec.quant is not None:
        raise SpecError("quantization", spec.quant.method, "the runtime runs unquantized "
                        "weights only (fp32, bf16, fp16): --weight-dtype bf16 runs this "
                        "checkpoint's shape in bf16")
    if spec.model_type not in SUPPORTED_MODEL_TYPES:
        raise SpecError("model_type", spec.model_type,
                        "the runtime builds: " + ", ".join(SUPPORTED_MODEL_TYPES))


def _refuse_attention(spec: ModelSpec) -> None:
    """MLA as DeepSeek-V3 defines it (a latent cache, no projection biases); sinks as gpt-oss."""
    att = spec.attention
    if att.kind == "mla" and spec.model_type != "deepseek_v3":
        raise SpecError("attention", "mla", "the runtime runs latent attention as deepseek_v3 "
                        f"defines it, not {spec.model_type}'s; plan it with servecap plan")
    if att.kind == "mla" and (att.mla_per_head_cache or att.qkv_bias):
        raise SpecError("attention", "mla", "the runtime caches MLA's latent (vLLM from 0.7.1) "
                        "and runs it without attention_bias")
    if att.sinks and spec.model_type != "gpt_oss":
        raise SpecError("sinks", True, "the runtime runs attention sinks as gpt_oss defines "
                        f"them, not {spec.model_type}'s; plan it with servecap plan")


def _refuse_kinds(spec: ModelSpec) -> None:
    """Nothing runs wrong silently: each kind the runtime cannot run is refused by name."""
    att = spec.attention
    for kind in dict.fromkeys(att.layer_kinds):
        if kind in UNRUN_KINDS:
            raise SpecError("layer kind", kind, "the runtime does not run "
                            f"{UNRUN_KINDS[kind]} yet; plan it with servecap plan")
        if kind in OWN_KINDS and spec.model_type not in OWN_KINDS[kind]:
            raise SpecError("layer kind", kind, f"the runtime runs {kind} layers as "
                            f"{' and '.join(OWN_KINDS[kind])} defines them, not "
                            f"{spec.model_type}'s; plan it with servecap plan")
    if spec.parallel_state:
        raise SpecError("layer kind", "attention + mamba", "the runtime does not run Mamba-2 "
                        "beside attention in one layer (Falcon-H1) yet; plan it with servecap "
                        "plan")
    if spec.state_layers and not any(k in ATTENTION_KINDS for k in att.layer_kinds):
        raise SpecError("layer kinds", "no attention layer", "the runtime runs hybrids with "
                        "at least one attention layer")
    if att.indexer_head_dim:
        raise SpecError("index_head_dim", att.indexer_head_dim, "the runtime does not run the "
                        "sparse-attention indexer (DeepSeek-V3.2, GLM-5) yet")
    if att.full_head_dim and att.full_head_dim != att.head_dim:
        raise SpecError("global_head_dim", att.full_head_dim, "the runtime does not run "
                        "per-layer-type head sizes (Gemma-4) yet")
    if att.q_gate and spec.model_type != "qwen3_next":
        raise SpecError("attn_output_gate", True, "the runtime runs gated attention output "
                        f"as qwen3_next defines it, not {spec.model_type}'s (Qwen3.5) yet")
