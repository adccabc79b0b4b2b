"""vLLM's hybrid page arithmetic: one page size for every cache group, the attention block size
raised until a page holds a layer's state, state pages padded to it (vllm-project/vllm:
vllm/model_executor/models/config.py HybridAttentionMambaModelConfig and
vllm/v1/core/kv_cache_utils.py get_kv_cache_groups, commit
001cabc1be16a59a70d720ed61a13b678c060a18). docs/hybrid.md derives it by hand."""

from dataclasses import dataclass
from math import lcm

from .cache_specs import (
    ALIGN_MODE,
    ALL_MODE,
    ChunkedLocalPage,
    FullAttentionPage,
    IndexerPage,
    MambaStatePage,
    SlidingWindowPage,
    cdiv,
    indexer_bytes_per_token,
)
from .errors import SpecError
from .model import CHUNKED, LINEAR, SLIDING, STATE_KINDS, ModelSpec
from .state import state_bytes_per_layer

DEFAULT_MAMBA_CACHE_MODE = ALIGN_MODE  # what prefix caching (vLLM's default) selects for hybrids
DEFAULT_MAMBA_CHUNK_SIZE = 256  # Mamba-2 SSD kernel chunk when the config states none


@dataclass(frozen=True)
class HybridLayout:
    """The pool's shape on one rank: one page size, group_size tensors, the groups' kinds."""

    block_size_tokens: int  # attention tokens per block after raising
    page_bytes: int  # one block in one tensor (every group's page, padded)
    group_size: int  # layers per group on this rank = tensors sharing each block id
    kinds: tuple[str, ...]  # one entry per group
    pages_per_request: int  # blocks one max_model_len request reserves, all groups together
    state_bytes: int = 0  # one state layer's state before padding
    uniform_type: bool = False  # one group whose page is the sum of every layer's (MLA+indexer)

    def num_gpu_blocks(self, pool_bytes: int) -> int:
        """int(pool // page // group_size) (get_num_blocks)."""
        if pool_bytes <= 0:
            return 0
        return pool_bytes // self.page_bytes // self.group_size

    def max_concurrency(self, num_blocks: int) -> float:
        """num_blocks / blocks one request reserves (get_max_concurrency_for_kv_cache_config)."""
        return num_blocks / self.pages_per_request if self.pages_per_request else 0.0


def layout(spec: ModelSpec, kv_bits: int, layer_ids: tuple[int, ...], tp: int,
           max_model_len: int, max_num_batched_tokens: int, block_size_tokens: int,
           mode: str = DEFAULT_MAMBA_CACHE_MODE, checkpoint_alignment: int = 0,
           all_chunk_aligned: bool = True) -> HybridLayout:
    """The layout vLLM builds for `spec` on one rank (all layers' specs, then the groups).
    max_num_batched_tokens: what a windowed layer reserves beyond its window (the release's
    in-flight tokens); checkpoint_alignment: gated-DeltaNet prefill checkpoints in align mode
    (0.33: the block a multiple of it, one state block more per request); all_chunk_aligned:
    'all' mode aligns the block to the Mamba chunk (to 0.31)."""
    from .kv import Shard, kv_bits_for_layer

    shard = Shard(tensor_parallel_size=tp, layers=layer_ids)
    att = spec.attention
    per_token = {n: kv_bits_for_layer(spec, n, kv_bits, shard) // 8 for n in range(spec.num_layers)}
    state = state_bytes_per_layer(spec.state, tp) if spec.state_layers else 0
    checkpoint = checkpoint_alignment if mode == ALIGN_MODE and LINEAR in \
        spec.attention.layer_kinds else 0
    block, padded = _block_size(spec, per_token, state, block_size_tokens, mode, checkpoint,
                                all_chunk_aligned)
    specs = {}
    for n in range(spec.num_layers):
        kind = spec.layer_kind(n)
        if kind in STATE_KINDS:
            specs[n] = MambaStatePage(state, padded, mode, block,
                                      checkpoint_blocks=1 if checkpoint else 0)
        elif per_token[n]:
            specs[n] = _attention_page(kind, block, per_token[n], att)
        if spec.parallel_state:  # Falcon-H1: the layer's Mamba-2 mixer is a layer of its own
            specs[("state", n)] = MambaStatePage(state, padded, mode, block)
    if att.indexer_head_dim:
        per = indexer_bytes_per_token(att.indexer_head_dim)
        specs.update({("indexer", n): IndexerPage(block, per) for n in range(spec.num_layers)})
    if not specs:
        raise SpecError("layer_types", spec.attention.layer_kinds, "at least one layer with a "
                        "cache (vLLM's attention-free models hold no pool)")
    held = set(layer_ids) | {(extra, n) for n in layer_ids for extra in ("indexer", "state")}
    return _groups(specs, held, block, state, max_model_len, max_num_batched_tokens)


def _attention_page(kind: str, block: int, per_token: int, att) -> FullAttentionPage:
    if kind == SLIDING and att.sliding_window_tokens:
        return SlidingWindowPage(block, per_token, window=att.sliding_window_tokens)
    if kind == CHUNKED and att.chunk_size_tokens:
        return ChunkedLocalPage(block, per_token, chunk=att.chunk_size_tokens)
    return FullAttentionPage(block, per_token)


def _block_size(spec: ModelSpec, per_token: dict, state: int, requested: int,
                mode: str, checkpoint: int = 0, chunk_aligned: bool = True) -> tuple[int, int]:
    """HybridAttentionMambaModelConfig.verify_and_update_config: the attention block is the
    smallest multiple of the kernel alignment (16; MLA 64; with gated-DeltaNet checkpoints
    lcm(alignment, checkpoint)) whose page holds one state ('all' to 0.31: a multiple of
    lcm(mamba chunk, alignment)); a larger --block-size is kept; the state page is padded to
    the attention page. Returns (block size, padded state page)."""
    if not state:
        return requested, 0
    one_token = next(b for b in per_token.values() if b)  # model_config.get_head_size()'s layer
    align = lcm(64 if spec.attention.kind == "mla" else 16, checkpoint or 1)
    if mode == ALL_MODE and chunk_aligned:
        chunk = lcm(DEFAULT_MAMBA_CHUNK_SIZE, align)
        block = chunk * cdiv(cdiv(state, one_token), chunk)
    else:
        block = align * cdiv(state, align * one_token)
    block = max(block, requested)
    if block * one_token < state:  # a state larger than the page: raise the block to hold it
        block = cdiv(state, one_token)
    return block, block * one_token


def _groups(specs: dict, held: set, block: int, state: int, max_model_len: int,
            batched: int) -> HybridLayout:
    """get_kv_cache_groups: one group when every layer is full attention (UniformTypeKVCache
    Specs: MLA + indexer, page = Σ layer pages); else page sizes unified by raising the smaller
    ones' block size, layers grouped by spec into groups of equal size (the smallest kind's
    count, or the largest's when < 1.5x the smallest), padded groups counted whole."""
    if all(type(s) in (FullAttentionPage, IndexerPage) for s in specs.values()):
        on_rank = [s for key, s in specs.items() if key in held]
        page = sum(s.page_size_bytes for s in on_rank)
        per_request = max(cdiv(s.max_memory_usage_bytes(max_model_len, batched),
                               s.page_size_bytes) for s in on_rank)
        return HybridLayout(block, page, 1, ("full",), per_request, state, True)
    specs = _unify_pages(specs)
    by_spec: dict = {}
    for key, item in specs.items():
        by_spec.setdefault(item, []).append(key)
    counts = [len(v) for v in by_spec.values()]
    size = max(counts) if max(counts) < min(counts) * 1.5 else min(counts)
    kinds, group_size, per_request, page = [], 0, 0, 0
    for item, keys in by_spec.items():
        count = cdiv(len(keys), size)
        for i in range(count):
            members = keys[i::count]
            kinds.append(_kind_name(item))
            group_size = max(group_size, len([k for k in members if k in held]))
            page = item.page_size_bytes
            per_request += item.max_memory_usage_bytes(max_model_len, batched)
    return HybridLayout(block, page, group_size, tuple(kinds), cdiv(per_request, page), state)


def _unify_pages(specs: dict) -> dict:
    """unify_kv_cache_spec_page_size: smaller pages grow by an integer ratio of tokens."""
    largest = max(s.page_size_bytes for s in specs.values())
    out = {}
    for key, item in specs.items():
        page = item.page_size_bytes
        if page == largest:
            out[key] = item
            continue
        if largest % page or isinstance(item, MambaStatePage):
            raise SpecError("layer shapes", f"pages of {page:,} and {largest:,} B", "vLLM "
                            "needs every page to divide the largest (NotImplementedError)")
        out[key] = item.with_block_size(item.block_size * (largest // page))
    return out


def _kind_name(item) -> str:
    return {MambaStatePage: "state", SlidingWindowPage: SLIDING, ChunkedLocalPage: CHUNKED,
            IndexerPage: "indexer"}.get(type(item), "full")
