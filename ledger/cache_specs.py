"""vLLM's per-layer cache specs, one frozen class per kind: page_size_bytes and the most one
request can hold (max_memory_usage_bytes), as vllm/v1/kv_cache_interface.py defines them
(vllm-project/vllm, commit 001cabc1be16a59a70d720ed61a13b678c060a18)."""

from dataclasses import dataclass, replace

NONE_MODE, ALIGN_MODE, ALL_MODE = "none", "align", "all"
MAMBA_CACHE_MODES = (NONE_MODE, ALIGN_MODE, ALL_MODE)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class FullAttentionPage:
    """FullAttentionSpec / MLAAttentionSpec: block_size x bytes one token takes in the layer
    (GQA 2 x H_kv x d x b; MLA one latent). A request holds cdiv(max_model_len, B) pages."""

    block_size: int
    bytes_per_token: int
    padded: int = 0

    @property
    def page_size_bytes(self) -> int:
        return max(self.block_size * self.bytes_per_token, self.padded)

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes

    def with_block_size(self, block_size: int):
        return replace(self, block_size=block_size)


@dataclass(frozen=True)
class SlidingWindowPage(FullAttentionPage):
    """SlidingWindowSpec: the window - 1 computed tokens plus one chunk of batched tokens, capped
    at max_model_len, + 1 page because the window need not start on a page edge."""

    window: int = 0

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        tokens = min(self.window - 1 + max_num_batched_tokens, max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes


@dataclass(frozen=True)
class ChunkedLocalPage(FullAttentionPage):
    """ChunkedLocalAttentionSpec (Llama-4's local layers): at most attention_chunk_size computed
    tokens plus the newly scheduled ones, capped at max_model_len; no +1 (chunks start on a page
    edge: the chunk size is a multiple of the block size)."""

    chunk: int = 0

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        tokens = min(self.chunk + max_num_batched_tokens, max_model_len)
        return cdiv(tokens, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class IndexerPage(FullAttentionPage):
    """DeepSeek-V3.2's sparse-attention indexer K cache (DeepseekV32IndexerCache, an
    MLAAttentionSpec of one head in uint8): per token index_head_dim fp8 values plus one fp32
    scale per 128 of them: 128 + 4 = 132 bytes per token per layer, whatever kv_cache_dtype."""


@dataclass(frozen=True)
class MambaStatePage:
    """MambaSpec: one page is the whole state (conv + recurrent), padded to the attention page
    (page_size_padded). A request holds 1 page (mamba_cache_mode 'none'), 2 ('align': the
    running state and one checkpoint at the last block edge; from 0.33 one more where
    gated-DeltaNet layers export prefill checkpoints, num_prefill_checkpoint_blocks) or
    cdiv(max_model_len, block_size) ('all': a state at every block edge), plus
    num_speculative_blocks."""

    state_bytes: int
    padded: int = 0
    mode: str = NONE_MODE
    block_size: int = 0
    num_speculative_blocks: int = 0
    checkpoint_blocks: int = 0

    @property
    def page_size_bytes(self) -> int:
        return max(self.state_bytes, self.padded)

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        if self.mode == ALL_MODE:
            return cdiv(max_model_len, self.block_size) * self.page_size_bytes
        extra = 2 + self.checkpoint_blocks if self.mode == ALIGN_MODE else 1
        return self.page_size_bytes * (extra + self.num_speculative_blocks)


INDEXER_QUANT_BLOCK = 128  # DeepSeek-V3.2: one fp32 scale per 128 fp8 indexer values


def indexer_bytes_per_token(index_head_dim: int) -> int:
    """index_head_dim x 1 B (fp8) + index_head_dim / 128 x 4 B (fp32 scales)."""
    return index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * 4
