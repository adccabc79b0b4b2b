"""The documented default estimate of the runtime peak, used only when none is declared."""

from . import dtypes
from .errors import SpecError
from .kv import WHOLE, Shard
from .model import ModelSpec
from .serve import ServeSpec

LOGIT_BITS = 32  # samplers upcast logits to fp32
# fp32 attention scores one grouped pass over paged K/V may hold (the runtime reads the cache a
# group of blocks at a time, so its attention transient is bounded by this, not by context)
ATTENTION_GROUP_SCORES = 1 << 15


def estimate_runtime_peak(spec: ModelSpec, serve: ServeSpec,
                          shard: Shard = WHOLE) -> tuple[int, str]:
    """An estimate, labelled as one: the widest transient of one forward pass over
    T = max_num_batched_tokens tokens, T x (2 x I_eff + 4 x H) x b_act, plus fp32 logits for
    max_num_seqs rows, max_num_seqs x V x 4 B. I_eff is the gated MLP width (x top-k for MoE).
    Measure it (servecap verify) and declare it with --runtime-peak for a real plan."""
    if not spec.has_architecture:
        raise SpecError("runtime_peak", None, f"{spec.name} has no hidden_size/vocab_size to "
                        "estimate the runtime peak from: declare it with --runtime-peak SIZE")
    act_bits = dtypes.lookup(serve.activation_dtype, "activation_dtype",
                             dtypes.ACTIVATION_DTYPES).bits
    inter = spec.intermediate_size
    if spec.moe is not None:
        inter = max(inter, spec.moe.expert_intermediate_size * spec.moe.num_experts_per_tok)
    inter //= shard.tensor_parallel_size
    tokens = serve.max_num_batched_tokens
    act = tokens * (2 * inter + 4 * spec.hidden_size) * act_bits // 8
    rows = min(serve.max_num_seqs, tokens) if shard.last_stage else 0
    logits = rows * spec.vocab_size * LOGIT_BITS // 8
    return act + logits, (f"estimate: {tokens:,} batched tokens x (2x{inter:,} + 4x"
                          f"{spec.hidden_size:,}) activations + logits; measure to replace")
