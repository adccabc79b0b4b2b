"""The KV pool: one tensor allocated once, blocks of block_size_tokens slots per layer for K and V.

Its size comes from the ledger (kv_bytes_per_token x block_size_tokens per block); this module
only multiplies by a block count, so a formula change in the ledger moves the pool with it.
"""

import torch

from servecap.ledger import dtypes
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import Shard, kv_bytes_per_token, kv_heads_per_rank
from servecap.ledger.model import ATTENTION_KINDS, ModelSpec
from servecap.ledger.plan import Plan
from servecap.ledger.verification import kv_pool_blocks

from .model import TORCH_DTYPES

NULL_BLOCKS = 1  # one extra block that padded block-table entries point at; never written
FP8_KV = torch.float8_e4m3fn  # vLLM's --kv-cache-dtype fp8 (e4m3 on CUDA)


def cache_dtype(kv_dtype: str) -> torch.dtype:
    """The pool's torch dtype: fp32/bf16/fp16 as named, fp8 as e4m3."""
    if kv_dtype == "fp8":
        return FP8_KV
    if kv_dtype not in TORCH_DTYPES:
        raise SpecError("kv_dtype", kv_dtype, "the runtime's KV pool holds: "
                        + ", ".join([*TORCH_DTYPES, "fp8"]))
    return TORCH_DTYPES[kv_dtype]


def block_bytes(spec: ModelSpec, block_size_tokens: int, kv_dtype: str,
                tensor_parallel_size: int = 1) -> int:
    """Bytes of one block in every layer, K and V, on one rank: the ledger's bytes/token x
    tokens/block."""
    bits = dtypes.lookup(kv_dtype, "kv_dtype", dtypes.KV_DTYPES).bits
    return kv_bytes_per_token(spec, bits, Shard(tensor_parallel_size)) * block_size_tokens


def blocks_for_plan(spec: ModelSpec, plan: Plan, tensor_parallel_size: int = 1) -> int:
    """Blocks in what the plan leaves for KV: device - (weights, metadata, runtime peak,
    safety). At the plan's context this holds exactly plan.memory_ceiling_requests requests."""
    serve = plan.serve
    return kv_pool_blocks(plan, block_bytes(spec, serve.block_size_tokens, serve.kv_dtype,
                                            tensor_parallel_size))


def cache_layout(spec: ModelSpec, tensor_parallel_size: int = 1) -> tuple[int, int, int]:
    """(planes, heads, dims) of one token in one layer: K and V of ceil(H_kv / tp) heads of d_h
    (GQA), or MLA's one latent of kv_lora_rank + qk_rope_head_dim, whole on every rank (the
    ledger's kv_bits_per_token_layer)."""
    att = spec.attention
    if att.kind == "mla":
        return 1, 1, att.kv_lora_rank + att.qk_rope_head_dim
    return 2, kv_heads_per_rank(spec, tensor_parallel_size), att.head_dim


class KVPool:
    """tensor: (attention layers, 2 [K, V], H_kv, num_blocks + 1, block_size_tokens, d_h) (MLA:
    (layers, 1, 1, ..., latent), cache_layout): every layer of a dense model; a hybrid's
    attention layers only (its state layers keep their
    state in the state pool, state_pool.py).

    Head-major, so one head's gathered blocks are a contiguous (tokens, d_h) matrix that batched
    matmuls read in place."""

    def __init__(self, spec: ModelSpec, num_blocks: int, block_size_tokens: int,
                 kv_dtype: str = "bf16", device: str | torch.device = "cpu",
                 tensor_parallel_size: int = 1) -> None:
        self.block_bytes = block_bytes(spec, block_size_tokens, kv_dtype, tensor_parallel_size)
        if num_blocks < 1:
            raise SpecError("num_blocks", num_blocks, "the KV pool needs at least one block "
                            f"of {self.block_bytes:,} bytes")
        self.num_blocks, self.block_size_tokens, self.kv_dtype = num_blocks, block_size_tokens, \
            kv_dtype
        self.null_block = num_blocks
        layers = [n for n in range(spec.num_layers) if spec.layer_kind(n) in ATTENTION_KINDS]
        self.index = {layer: i for i, layer in enumerate(layers)}
        planes, heads, dim = cache_layout(spec, tensor_parallel_size)
        shape = (len(layers), planes, heads, num_blocks + NULL_BLOCKS, block_size_tokens, dim)
        self.tensor = torch.zeros(shape, dtype=cache_dtype(kv_dtype), device=device)
        # vLLM's --kv-cache-dtype fp8 without checkpoint scales: per-tensor scale 1.0, so a
        # value is stored as (x / scale) in e4m3 and read back as stored x scale
        self.k_scale = self.v_scale = 1.0
        if self.tensor_bytes != self.block_bytes * (num_blocks + NULL_BLOCKS):
            raise AssertionError("KV pool tensor disagrees with the ledger's bytes per block")

    @property
    def tensor_bytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()

    @property
    def usable_bytes(self) -> int:
        """Bytes of the blocks requests can hold: num_blocks x block_bytes."""
        return self.num_blocks * self.block_bytes

    @property
    def null_block_bytes(self) -> int:
        return NULL_BLOCKS * self.block_bytes

    def to_cache(self, x: torch.Tensor, which: str) -> torch.Tensor:
        """New K or V in the cache's dtype: cast, or divided by the fp8 scale and cast."""
        if x.dtype == self.tensor.dtype:
            return x
        scale = self.k_scale if which == "k" else self.v_scale
        return (x if scale == 1.0 else x / scale).to(self.tensor.dtype)

    def layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(K, V) of one layer, each (H_kv, num_blocks + 1, block_size_tokens, d_h); MLA: (the
        latent, None), (1, num_blocks + 1, block_size_tokens, kv_lora_rank + qk_rope_head_dim)."""
        i = self.index[layer]
        return self.tensor[i, 0], self.tensor[i, 1] if self.tensor.shape[1] == 2 else None

    def copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        """Copy-on-write: block src's K and V in every layer into block dst."""
        if copies:
            device = self.tensor.device
            src = torch.tensor([s for s, _ in copies], device=device)
            dst = torch.tensor([d for _, d in copies], device=device)
            data = self.tensor.view(torch.uint8) if self.tensor.dtype == FP8_KV else self.tensor
            data[:, :, :, dst] = data[:, :, :, src]
