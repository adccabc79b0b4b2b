"""ServeSpec: the deployment being planned (device, load, dtypes, budgets), frozen."""

from dataclasses import dataclass

from .encoder import EncoderSpec
from .eplb import EplbSpec
from .errors import SpecError
from .kv_offload import OffloadSpec
from .lora import LoraSpec
from .paging import check_lengths
from .scheduler_defaults import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS

DEFAULT_BLOCK_SIZE_TOKENS = 16  # vLLM's default --block-size
DEFAULT_SAFETY_FRACTION = 0.10  # vLLM's default gpu_memory_utilization = 0.90
DEFAULT_WATERMARK = 0.01  # vLLM's share of KV blocks kept free at admission
# Scheduler defaults live once in scheduler_defaults.py (vLLM's); cli/ and sim/ import them
# from here.
# Resident requests on one device: far above what engines schedule (vLLM's max_num_seqs is 256
# by default; 1,024 is a large setting); a larger figure is a typo, and would be planned request
# by request.
MAX_CONCURRENCY = 65_536


@dataclass(frozen=True)
class ServeSpec:
    """One device's deployment. Sizes are int bytes; None means 'not declared, estimate it'."""

    device_bytes: int
    context_tokens: int
    concurrency: int
    lengths: tuple[int, ...] = ()
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS
    shared_prefix_tokens: int = 0
    runtime_peak_bytes: int | None = None
    safety_bytes: int | None = None
    safety_fraction: float | None = None
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    device_label: str = ""
    mamba_cache_mode: str = "align"  # vLLM's for hybrids with prefix caching (its default)
    interconnect: str | None = None  # pcie or nvlink between tensor-parallel peers (None:
    # the catalog device's; ledger/devices.py tp_link)
    gpus_per_node: int | None = None  # the tp x pp ranks a node holds (vLLM's world_size //
    # nnodes); None: every rank on one node
    lora: LoraSpec | None = None  # --enable-lora: adapter slots beside the weights
    eplb: EplbSpec | None = None  # --enable-eplb: redundant experts and the balancer's state
    kv_offload: OffloadSpec | None = None  # --kv-offloading-size: a host KV tier
    encoder: EncoderSpec | None = None  # a multimodal model's encoder cache and profile

    def __post_init__(self) -> None:
        check_count("device", self.device_bytes)
        check_count("context", self.context_tokens, "tokens per request")
        check_count("concurrency", self.concurrency, "resident requests")
        if self.concurrency > MAX_CONCURRENCY or len(self.lengths) > MAX_CONCURRENCY:
            raise SpecError("concurrency", self.concurrency if not self.lengths else
                            len(self.lengths), f"at most {MAX_CONCURRENCY:,} resident requests "
                            "on one device")
        check_count("block_size", self.block_size_tokens, "tokens per block")
        check_count("max_num_batched_tokens", self.max_num_batched_tokens, "tokens")
        check_count("max_num_seqs", self.max_num_seqs, "sequences per step")
        if self.gpus_per_node is not None:
            check_count("gpus_per_node", self.gpus_per_node, "GPUs")
        check_lengths(self.lengths)
        if self.mamba_cache_mode not in ("none", "align", "all"):
            raise SpecError("mamba_cache_mode", self.mamba_cache_mode, "none, align or all")
        if self.shared_prefix_tokens < 0:
            raise SpecError("shared_prefix", self.shared_prefix_tokens, "must be >= 0 tokens")

    @property
    def live_lengths(self) -> tuple[int, ...]:
        """Σ_r S_r form of the load: explicit lengths, else `concurrency` requests of context."""
        return self.lengths or (self.context_tokens,) * self.concurrency


def check_count(field: str, value: int, unit: str = "bytes") -> int:
    """A whole number >= 1 of `unit`, else the one error every count gets."""
    if not isinstance(value, int) or value < 1:
        raise SpecError(field, value, f"must be a whole number >= 1 ({unit})")
    return value
