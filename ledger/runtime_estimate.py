"""The documented default estimate of the runtime peak, used only when none is declared.

An upper bound on the transient bytes of servecap's runtime (runtime/model.py, attention.py,
runner.py) for one step, term by term, so each term can be checked against the code that makes
it. A step is the widest of two the scheduler can build: a prefill chunk of
max_num_batched_tokens tokens, and a decode of max_num_seqs sequences. Neither depends on how
many requests are resident: attention reads the paged KV a bounded group of blocks at a time.
"""

from dataclasses import dataclass

from . import dtypes
from .arch import routed_layers
from .errors import SpecError
from .kv import WHOLE, Shard, kv_heads_per_rank
from .mla_estimate import MLADims, mla_dims, mla_peak
from .model import ModelSpec
from .moe_estimate import MoEDims, moe_dims, moe_peak
from .serve import DEFAULT_BLOCK_SIZE_TOKENS, ServeSpec
from .state_estimate import StateDims, state_dims, state_layer_peak

LOGIT_BITS = 32  # samplers upcast logits to fp32
FP32_BYTES = 4  # scores, softmax state and RMSNorm run in fp32
INDEX_BYTES = 8  # int64 token ids, positions, slots, sequence lengths
# ids, positions, slot_mapping, seq_lens, and the query positions paged attention is handed
# (a chunk's arange, a decode's lengths - 1): one int64 per token each
STEP_INDEX_TENSORS = 5
SMALL_TENSOR_BYTES = 16384  # scalar operands, block tables and other tensors of a few bytes
# fp32 attention scores one grouped pass over paged K/V may hold (the runtime reads the cache a
# group of blocks at a time, so its attention transient is bounded by this, not by context)
ATTENTION_GROUP_SCORES = 1 << 15
# tokens per chunk of the runtime's chunked state scans (Mamba-2 SSD, gated delta rule): the
# (chunk x chunk) per-head intermediates a prefill makes are bounded by it
STATE_SCAN_CHUNK_TOKENS = 64
# fp32 state elements one group of decoding sequences steps at once (their states gathered from
# the state pool, stepped, written back): bounds a decode's state transient, whatever the batch
STATE_GROUP_ELEMENTS = 1 << 22


def state_group_rows(state_elements: int) -> int:
    """Sequences one decode group of a state layer steps together (at least one)."""
    return max(1, STATE_GROUP_ELEMENTS // state_elements)


@dataclass(frozen=True)
class Dims:
    """One rank's widths: hidden, MLP (I_eff / tp), query and KV (heads x d_h), vocabulary."""

    hidden: int
    inter: int
    q: int
    kv: int
    head_dim: int
    q_heads: int
    kv_heads: int
    vocab: int
    act_bytes: int
    kv_bytes: int
    block: int
    qk_norm: bool = False
    exact: bool = True  # False: KV dtype unknown, a cast of the gathered K/V always counted
    gated_mlp: bool = True  # False: up/down only (Nemotron-H's relu2 MLP)
    q_gate: bool = False  # q_proj also emits an output gate (Qwen3-Next)
    state: StateDims | None = None  # hybrids' state layers (ledger/state_estimate.py)
    moe: MoEDims | None = None  # routed layers (ledger/moe_estimate.py)
    mla: MLADims | None = None  # latent attention (ledger/mla_estimate.py): q and kv are the
    # latent-space query (heads x (L + R)) and the one latent, read as key and value at once
    kv_planes: int = 2  # K and V cached apart; MLA's one latent: 1

    @property
    def cast_bytes(self) -> int:
        """An fp32 copy the runtime makes of activations that are not already fp32."""
        return FP32_BYTES if self.act_bytes != FP32_BYTES else 0


def group_tokens(num_rows: int, num_heads: int, block_size: int) -> int:
    """Key positions one grouped attention pass reads for num_rows query rows (sequences x
    queries): whole blocks, as many as keep rows x heads x tokens fp32 scores within
    ATTENTION_GROUP_SCORES, and at least one block."""
    return block_size * max(1, ATTENTION_GROUP_SCORES // (num_rows * num_heads * block_size))


def estimate_runtime_peak(spec: ModelSpec, serve: ServeSpec,
                          shard: Shard = WHOLE) -> tuple[int, str]:
    """The plan's default runtime peak: runtime_peak_bound for any KV dtype and a block of up
    to 16 tokens, so it depends only on the model, activation dtype, max_num_batched_tokens
    and max_num_seqs. Measure it (servecap verify) and declare it with --runtime-peak."""
    return runtime_peak_bound(spec, serve, shard, exact=False)


def runtime_peak_bound(spec: ModelSpec, serve: ServeSpec, shard: Shard = WHOLE,
                       exact: bool = True) -> tuple[int, str]:
    """max(prefill chunk of T = max_num_batched_tokens, decode of S = max_num_seqs), each the
    sum of its terms (step_terms), for serve's KV dtype and block size (exact) or the widest
    (not exact)."""
    if not spec.has_architecture:
        raise SpecError("runtime_peak", None, f"{spec.name} has no hidden_size/vocab_size to "
                        "estimate the runtime peak from: declare it with --runtime-peak SIZE")
    dims = _dims(spec, serve, shard, exact)
    tokens, seqs = serve.max_num_batched_tokens, min(serve.max_num_seqs,
                                                     serve.max_num_batched_tokens)
    rows = seqs if shard.last_stage else 0
    chunk = sum(step_terms(dims, tokens, 1, rows).values())
    decode = sum(step_terms(dims, seqs, seqs, rows).values())
    return max(chunk, decode), (f"estimate: the widest step of {tokens:,} batched tokens or "
                                f"{seqs:,} decodes, term by term (activations, MLP, attention, "
                                "logits, sampling); measure to replace")


def step_terms(dims: Dims, num_tokens: int, num_seqs: int, logit_rows: int) -> dict[str, int]:
    """Bytes by term for a step of num_tokens query rows over num_seqs sequences (a chunk:
    1 sequence; a decode: one row each) and logit_rows sampled rows:

    index        5 int64 per token (ids, positions, slots, lengths, attention's query
                 positions), one length per sequence, block tables covering each sequence's
                 new tokens and two groups of keys before them (a chunk's table grows with the
                 chunk, T / B ids; a context longer than that adds S x context / B x 8 B more,
                 which this context-free estimate leaves out)
    residual     the (T, H) stream, updated in place, and RoPE cos/sin (T, d_h) x 2
    layer        the widest sublayer: RMSNorm, attention or MLP (layer_peak)
    logits       the final (T, H) hidden, its R sampled rows, (R, V) logits in the activation
                 dtype and in fp32
    sampling     fp32 softmax of one temperature row (2 x V x 4 B) and R int64 tokens
    small        scalars, block tables and other small tensors (SMALL_TENSOR_BYTES)
    The layer and logits phases never overlap, so the step is index + max(residual + layer,
    logits) + sampling. Nothing here depends on the context length: a group never holds more
    than group_tokens keys per sequence, however long the sequence."""
    t, b = num_tokens, dims.act_bytes
    group = group_tokens(t, dims.q_heads, dims.block)
    residual = t * dims.hidden * b + 2 * t * dims.head_dim * b
    layer = layer_peak(dims, t, num_seqs, group)
    logits = t * dims.hidden * b + logit_rows * (dims.hidden * b + dims.vocab * b
                                                 + dims.vocab * dims.cast_bytes)
    # block ids of each sequence's new tokens and two groups of keys (any block up to the
    # default when the block is not known: one token a block is the longest table)
    table_block = dims.block if dims.exact else 1
    keys = t // num_seqs - 1 + 2 * group_tokens(t, dims.q_heads, table_block)
    tables = num_seqs * (keys // table_block + 1)
    return {"index": INDEX_BYTES * (STEP_INDEX_TENSORS * t + num_seqs + tables),
            "layers": max(residual + layer, logits),
            "sampling": 2 * dims.vocab * FP32_BYTES + logit_rows * INDEX_BYTES,
            "small": SMALL_TENSOR_BYTES}


def layer_peak(dims: Dims, tokens: int, num_seqs: int, group: int) -> int:
    """The widest of one layer's phases, beyond the residual stream:
    norm       fp32 x^2, then x * rsqrt (plus the fp32 copy of x when not fp32)
    attention  h, q, k, v held (T x (H + q + 2 kv)) and the widest of: RoPE (2 q), the fused
               prompt kernel's output, its log-sum-exp and row-major copy with o_proj (H), or
               the paged pass (paged_attention)
    mlp        h and two (T, I) (gate, up), then gate and the (T, H) down projection
    moe        a routed layer (ledger/moe_estimate.py moe_peak)
    (Qwen3's q/k RMSNorm holds fp32 (T, q) temporaries inside the attention phase.)
    state      a hybrid's linear-attention or Mamba-2 layer (state_estimate.state_layer_peak)"""
    t, b, d = tokens, dims.act_bytes, dims
    norm = t * d.hidden * (FP32_BYTES + d.cast_bytes)
    held = t * (d.hidden + d.q + 2 * d.kv) * b
    prompt = t * (2 * d.q * b + d.hidden * b + d.q_heads * FP32_BYTES)
    qk_norm = t * d.q * (FP32_BYTES + d.cast_bytes) if d.qk_norm else 0  # RMSNorm of q
    attention = held + max(2 * t * d.q * b, qk_norm, prompt,
                           paged_attention(d, t, num_seqs, group), t * (d.q + d.hidden) * b)
    if d.mla is not None:  # the prompt kernel's output, its row-major copy and log-sum-exp
        attend = max(t * (2 * d.q * b + d.q_heads * FP32_BYTES),
                     paged_attention(d, t, num_seqs, group))
        attention = mla_peak(d.mla, t, d.hidden, b, attend)
    if d.q_gate:  # q_proj's gate rows beside q, then the gate's row-major copy
        attention += 2 * t * d.q * b
    mlp = t * d.hidden * b + max(2 * t * d.inter * b, t * (d.inter + d.hidden) * b)
    if not d.gated_mlp:  # relu(up) squared in place, then down
        mlp = t * d.hidden * b + t * (d.inter + d.hidden) * b
    widest = max(norm, attention, mlp)
    if d.moe is not None:
        widest = max(widest, moe_peak(d.moe, t, d.hidden, b))
    if d.state is not None:  # the normed input, then the state layer
        num_decode = tokens if num_seqs == tokens else 0
        widest = max(widest, t * d.hidden * b + state_layer_peak(
            d.state, t, num_decode, b, STATE_SCAN_CHUNK_TOKENS, state_group_rows(d.state.state)))
    return widest


def paged_attention(dims: Dims, rows: int, num_seqs: int, group: int) -> int:
    """Inside one grouped pass of `group` key slots per sequence for `rows` query rows: the
    K and V group buffers, the query in (Hkv, S, QG, D) order, query and key positions and
    gather indices, a cast of the gathered K/V when the cache is in another dtype, five fp32
    values per query row and head (the running max and sum, the group's max, its copy with
    -inf made 0, and the group's sum), the group's bool mask, and the widest of: fp32 scores and
    their masked copy with the running fp32 accumulator; the scores, their cast and two
    accumulators; the accumulator, the output and its row-major copy."""
    d, b = dims, dims.act_bytes
    scores = rows * d.q_heads * group
    groups_per_kv = d.q_heads // d.kv_heads
    acc = rows * d.q * FP32_BYTES
    keys = num_seqs * group
    buffers = d.kv_planes * keys * d.kv * d.kv_bytes
    converted = d.kv_planes * keys * d.kv * b if d.kv_bytes != b or not d.exact else 0
    indices = (group + d.kv_heads * keys // d.block) * INDEX_BYTES
    cast = b if b != FP32_BYTES else 0
    # a reduced-precision batched matmul on the CPU computes in fp32: copies of its operands
    # (the group's K or V read twice) and of its result
    upcast = (scores + d.kv_planes * keys * d.kv + rows * d.q) * FP32_BYTES if cast else 0
    # the mask: its operands (causal, window, length) are freed once combined, before any score
    mask = rows * groups_per_kv * group
    state = 5 * rows * d.q_heads * FP32_BYTES  # running max and sum, new max, its safe copy, sum
    # the query's and the output's (Hkv, S, QG, D) <-> (S, Q, H, D) reorderings are copies
    # unless one KV head serves every query head (MQA, MLA's latent): then they are views
    reorder = rows * d.q * b if d.kv_heads > 1 else 0
    widest = max(mask + state + max(2 * scores * FP32_BYTES + acc,
                             scores * (FP32_BYTES + cast) + upcast + acc + rows * d.q * b,
                             scores * FP32_BYTES + 2 * acc + rows * d.q * cast),
                 acc + rows * d.q * cast + reorder)
    return (reorder + rows * groups_per_kv * INDEX_BYTES + buffers + converted
            + indices + widest)


def _dims(spec: ModelSpec, serve: ServeSpec, shard: Shard, exact: bool) -> Dims:
    act = dtypes.lookup(serve.activation_dtype, "activation_dtype",
                        dtypes.ACTIVATION_DTYPES).bits // 8
    # the plan's estimate must not move when the KV dtype or block size is edited (the
    # workbook's what-ifs keep it): K/V buffers at fp32 with a cast always counted, groups of
    # the default block; exact=True states the run's own KV dtype and block instead
    kv = dtypes.lookup(serve.kv_dtype, "kv_dtype", dtypes.KV_DTYPES).bits // 8 if exact \
        else FP32_BYTES
    tp, att = shard.tensor_parallel_size, spec.attention
    with_mlp = range(spec.num_layers) if spec.mlp_layers is None else spec.mlp_layers
    dense = set(with_mlp) - set(routed_layers(spec))
    inter = spec.intermediate_size if dense else 0
    q_heads = max(1, att.num_heads // tp)
    kv_heads = min(q_heads, kv_heads_per_rank(spec, tp))
    q, kv_width, head_dim, planes = q_heads * att.head_dim, kv_heads * att.head_dim, \
        att.head_dim, 2
    mla = mla_dims(spec, tp)
    if mla is not None:  # one latent of L + R: the key, the value and each head's query width
        q, kv_width, head_dim, planes, kv_heads = q_heads * mla.latent, mla.latent, \
            mla.rope, 1, 1
    return Dims(spec.hidden_size, inter // tp, q, kv_width, head_dim, q_heads, kv_heads,
                spec.vocab_size, act, max(1, kv),
                serve.block_size_tokens if exact else DEFAULT_BLOCK_SIZE_TOKENS,
                att.qk_norm, exact, spec.gated_mlp, att.q_gate, state_dims(spec),
                moe_dims(spec, tp), mla, planes)
