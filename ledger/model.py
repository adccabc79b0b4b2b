"""ModelSpec: the frozen description of a model that every ledger formula reads."""

from dataclasses import dataclass, field

from .errors import SpecError

FULL = "full"
SLIDING = "sliding"


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
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def has_architecture(self) -> bool:
        return self.hidden_size > 0 and self.vocab_size > 0

    def layer_kind(self, layer: int) -> str:
        kinds = self.attention.layer_kinds
        return kinds[layer] if kinds else FULL
