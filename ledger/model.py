"""ModelSpec: the frozen description of a model that every ledger formula reads."""

from dataclasses import dataclass, field

from .encoders import Encoder
from .errors import SpecError
from .vision import VisionSpec

FULL = "full"
SLIDING = "sliding"
CHUNKED = "chunked"  # chunked local attention (Llama-4): attends within its 8,192-token chunk
LINEAR = "linear"  # gated DeltaNet linear attention: a fixed state, no KV (Qwen3-Next, Qwen3.5)
MAMBA = "mamba"  # Mamba-2 state-space layer: a fixed state, no KV (Nemotron-H, Granite-4)
NONE = "none"  # a layer with no cache at all (Nemotron-H's MLP and MoE-only layers)
CONV = "conv"  # a gated short convolution: a fixed conv state, no KV (LFM2's ShortConv)
ATTENTION_KINDS = (FULL, SLIDING, CHUNKED)  # layers whose cache grows with the context
STATE_KINDS = (LINEAR, MAMBA, CONV)  # layers that keep one fixed state per request


@dataclass(frozen=True)
class Attention:
    """Attention shape. kind 'gqa' covers MHA and MQA too; 'mla' caches a compressed latent."""

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    qk_norm: bool = False
    sinks: bool = False
    sliding_window_tokens: int | None = None
    layer_kinds: tuple[str, ...] = ()
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    chunk_size_tokens: int | None = None
    full_head_dim: int = 0  # full-attention layers' head size when it differs (Gemma-4: 512)
    full_kv_heads: int = 0  # and their KV heads (Gemma-4: num_global_key_value_heads)
    indexer_head_dim: int = 0  # DeepSeek-V3.2 sparse-attention indexer: one K of this size
    rotary_dim: int = 0  # rotated dims when only part of a head rotates (MiniMax, Qwen3.5)
    q_gate: bool = False  # q_proj also emits an output gate (Qwen3-Next, Qwen3.5): 2x rows
    qk_norm_heads: bool = False  # q/k norms span every head (MiniMax's per_layer qk_norm)
    indexer_heads: int = 0  # indexer query heads (DeepSeek-V3.2 index_n_heads)
    # MLA run as multi-head attention (vLLM before 0.7.1, VllmRow.mla): K and V cached per head
    mla_per_head_cache: bool = False

    def shape(self, kind: str) -> tuple[int, int]:
        """(KV heads, head size) of a layer of this kind."""
        if kind == FULL and self.full_head_dim:
            return self.full_kv_heads or self.num_kv_heads, self.full_head_dim
        return self.num_kv_heads, self.head_dim


@dataclass(frozen=True)
class LayerShape:
    """One layer's own shape, for families whose vLLM model class builds each layer from its
    own config entry (DeciLM's block_configs, Laguna's and MiMo-V2's per-layer heads, Gemma-3n/4's
    KV sharing): query heads, KV heads, the K and the V head size, the feed-forward width (0: no
    feed-forward block), and whether the layer has an attention block at all. kv_source: the
    earlier layer whose K and V this one reads (vLLM's kv_sharing_target_layer_name): it caches
    nothing and its checkpoint holds no K/V projections. sinks: per-head attention sinks."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    intermediate: int
    attention: bool = True
    kv_source: int | None = None
    sinks: bool = False

    @property
    def caches_kv(self) -> bool:
        return self.attention and self.kv_source is None


@dataclass(frozen=True)
class PerLayerInput:
    """Gemma-3n/4's per-layer embeddings (PLE): a second embedding table of vocab x (layers x
    width), a projection of the hidden state to the same width, and in every layer a gate and a
    projection back (vllm/model_executor/models/gemma4.py at v0.21.0)."""

    vocab_size: int
    width: int


@dataclass(frozen=True)
class StateShape:
    """The fixed per-request state of one linear-attention or Mamba-2 layer, as vLLM keeps it
    (vllm/model_executor/layers/mamba/mamba_utils.py, MambaStateShapeCalculator, commit
    02d710837549a368073552333f66d714477415d2): a conv state (conv_kernel - 1, conv_dim) in
    conv_dtype and a recurrent ("temporal") state of recurrent_heads x recurrent_shape in
    ssm_dtype. Sharded dims (conv_dim, recurrent_heads) divide by the tensor-parallel size.
    Mamba-2 conv_dim = intermediate + 2 n_groups d_state, recurrent (heads, head_dim, d_state);
    gated DeltaNet conv_dim = 2 Hk dk + Hv dv, recurrent (Hv, dv, dk)."""

    kind: str
    conv_dim: int
    conv_kernel: int
    recurrent_heads: int
    recurrent_shape: tuple[int, int]
    conv_dtype: str = "bf16"
    ssm_dtype: str = "bf16"
    n_groups: int = 0  # Mamba-2 B/C groups (replicated when n_groups % tp != 0)
    d_state: int = 0
    intermediate: int = 0
    proj_weights: int = 0  # parameters of one layer's projections, norms and conv (weights)
    conv_bias: bool = True  # conv1d has a bias (mamba_conv_bias)
    gated_norm: bool = True  # a gated RMSNorm over the intermediate (Falcon-H1: mamba_rms_norm)
    in_proj_bias: bool = False  # in_proj has a bias (mamba_proj_bias)
    out_proj_bias: bool = False  # out_proj has a bias (Granite: mamba_proj_bias; Falcon:
    # projectors_bias)


@dataclass(frozen=True)
class MoE:
    """Mixture of experts: every expert is resident; only num_experts_per_tok compute per token."""

    num_experts: int
    num_experts_per_tok: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0
    dense_layers: tuple[int, ...] = ()
    router_bias: bool = False
    expert_bias: bool = False
    shared_expert_gate: bool = False  # a 1 x hidden sigmoid gate on the shared expert (Qwen)
    # latent MoE (Nemotron-3 Super): routed experts read and write this width, not hidden;
    # fc1_latent_proj (latent x hidden) and fc2_latent_proj (hidden x latent) wrap them
    latent_size: int = 0

    def expert_width(self, hidden_size: int) -> int:
        """The width a routed expert's up projection reads and its down projection writes."""
        return self.latent_size or hidden_size


@dataclass(frozen=True)
class Quant:
    """Weight quantization as the checkpoint stores it.

    granularity: 'group' (AWQ/GPTQ, group_size elements share a scale), 'tensor', 'channel',
    'block' (block_shape 2-D tiles share an fp32 scale), 'microblock' (MXFP4/NVFP4: group_size
    elements share an 8-bit scale)."""

    method: str
    bits: int
    granularity: str
    group_size: int = 0
    zero_point: bool = False
    scale_bits: int = 16
    block_shape: tuple[int, int] = (0, 0)
    per_tensor_scale: bool = False
    modules_not_converted: tuple[str, ...] = ()
    # per-module formats (modelopt MIXED_PRECISION, compressed-tensors config groups): (module
    # pattern, its format), first match wins; a module none names takes this Quant's own
    # format, or stays dense when unlisted_dense (ledger/module_formats.py resolves them)
    module_formats: tuple[tuple[str, "Quant"], ...] = ()
    unlisted_dense: bool = False
    patterns: str = "segment"  # segment (AWQ/GPTQ/fp8 names), glob (modelopt), exact (c-t)
    input_scale: bool = False  # one fp32 static activation scale per matrix
    extra_bits_per_matrix: int = 0  # e.g. compressed-tensors' int64 (2,) weight_shape
    sparse_24: bool = False  # 2:4 sparse, compressed: half the values + a 1-bit mask each
    quantizes_lm_head: bool = False  # lm_head is stored in this format unless excluded
    act_order: bool = False  # GPTQ desc_act: g_idx permutes the input columns
    producer: str = ""  # the checkpoint's format family: modelopt, compressed-tensors, ...
    label: str = ""  # how the format is named where it is shown ('' : method)

    @property
    def name(self) -> str:
        """The format's name in the ledger: its label, else its method."""
        return self.label or self.method

    def __post_init__(self) -> None:
        """A zero-sized group or tile would divide by zero or silently drop the scales."""
        if self.group_size < 0:
            raise SpecError("group_size", self.group_size, "a whole number >= 1 (0: per channel)")
        if self.granularity == "microblock" and self.group_size < 1:
            raise SpecError("group_size", self.group_size, f"{self.method} needs blocks >= 1")
        if self.granularity == "block" and min(self.block_shape) < 1:
            raise SpecError("weight_block_size", list(self.block_shape), "two sizes >= 1")


@dataclass(frozen=True)
class ModelSpec:
    """A model as the ledger sees it. Architecture fields are 0 when only a parameter count is
    known (the teaching case); then formulas that need them fail closed."""

    name: str
    source: str
    num_layers: int
    attention: Attention
    hidden_size: int = 0
    intermediate_size: int = 0
    vocab_size: int = 0
    tie_word_embeddings: bool = False
    norms_per_layer: int = 2
    moe: MoE | None = None
    quant: Quant | None = None
    num_parameters: int | None = None
    checkpoint_dtype: str = "bf16"
    max_position_embeddings: int = 0
    model_type: str = ""
    architecture: str = ""  # the config's architectures[0], what vLLM dispatches on
    notes: tuple[str, ...] = field(default_factory=tuple)
    state: StateShape | None = None
    mlp_layers: tuple[int, ...] | None = None  # layers with an MLP/MoE block (None: every one)
    gated_mlp: bool = True  # gate/up/down; False: up/down only (Nemotron-H's relu2 MLPs)
    parallel_state: bool = False  # every layer runs a Mamba-2 mixer beside its attention and
    # keeps both caches (Falcon-H1's parallel hybrid)
    layer_shapes: tuple[LayerShape, ...] = ()  # one per layer where layers differ (else ())
    per_layer_input: PerLayerInput | None = None
    head_gate: bool = False  # a per-head sigmoid/softplus output gate, g_proj (Laguna)
    altup_inputs: int = 0  # Gemma-3n's AltUp streams (0: none)
    laurel_rank: int = 0  # Gemma-3n's LAuReL low-rank residual (0: none)
    vision: VisionSpec | None = None  # a multimodal config's vision tower (the encoder budget)
    encoder: Encoder | None = None  # the vision tower vLLM loads beside it (ledger/encoders.py)
    mrope: bool = False  # multimodal rotary positions: vLLM's MRotaryEmbedding (its cache is
    # larger, ledger/vllm_buffers.py)
    norm_bias: bool = False  # each norm is a LayerNorm with a bias beside its weight (Phi)
    mlp_bias: bool = False  # the dense MLP's projections carry biases (Phi's fc1 / fc2)
    lm_head_bias: bool = False  # lm_head carries one bias per vocabulary row (Phi)

    @property
    def state_layers(self) -> tuple[int, ...]:
        """Layers that keep a fixed state per request (linear attention, Mamba-2): every layer
        of a parallel hybrid, beside its attention KV."""
        if self.parallel_state:
            return tuple(range(self.num_layers))
        return tuple(i for i in range(self.num_layers) if self.layer_kind(i) in STATE_KINDS)

    @property
    def is_hybrid(self) -> bool:
        """Anything vLLM pages beyond uniform full/sliding GQA or MLA: states, chunked local
        attention, an indexer cache or per-layer-type head shapes."""
        att = self.attention
        kinds = set(att.layer_kinds)
        return bool(kinds - {FULL, SLIDING}) or bool(att.indexer_head_dim) or bool(
            att.full_head_dim and att.full_head_dim != att.head_dim) or self.parallel_state \
            or bool(self.layer_shapes)

    @property
    def has_architecture(self) -> bool:
        return self.hidden_size > 0 and self.vocab_size > 0

    def layer_kind(self, layer: int) -> str:
        kinds = self.attention.layer_kinds
        return kinds[layer] if kinds else FULL

    def shape_at(self, layer: int) -> LayerShape:
        """The layer's own shape, or the model-wide one of its kind (Attention.shape)."""
        if self.layer_shapes:
            return self.layer_shapes[layer]
        att = self.attention
        kv_heads, head_dim = att.shape(self.layer_kind(layer))
        return LayerShape(att.num_heads, kv_heads, head_dim, head_dim, self.intermediate_size)
