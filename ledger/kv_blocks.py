"""vLLM's KV pool arithmetic: cache groups, pages, GPU blocks, cache tokens, max concurrency."""

from dataclasses import dataclass

from .model import FULL, SLIDING

V1 = "v1"  # vLLM V1 >= 0.9: concurrency = blocks / blocks one max_model_len request needs
V0 = "v0"  # vLLM V0 and V1 <= 0.8: concurrency = blocks x block_size / max_model_len


@dataclass(frozen=True)
class KVGroups:
    """vLLM's KV cache groups: layers sharing one block table. `layers[i]` are global layer ids
    of group i and `kinds[i]` its attention kind ('full' or 'sliding')."""

    kinds: tuple[str, ...]
    layers: tuple[tuple[int, ...], ...]

    def group_size_on(self, layer_ids: tuple[int, ...]) -> int:
        """Layers per group on one rank: the number of tensors that share each block id."""
        held = set(layer_ids)
        return max(len([n for n in group if n in held]) for group in self.layers)


def kv_cache_groups(layer_kinds: tuple[str, ...]) -> KVGroups:
    """Group layers as vLLM does (kv_cache_utils._get_kv_cache_groups_uniform_page_size): one
    group when every layer is the same kind; else groups of `g` layers of one kind each, g = the
    smallest kind's count (the largest when that is < 1.5x the smallest), layers[i::n]."""
    by_kind: dict[str, list[int]] = {}
    for layer, kind in enumerate(layer_kinds):
        by_kind.setdefault(kind, []).append(layer)
    if len(by_kind) == 1:
        kind, layers = next(iter(by_kind.items()))
        return KVGroups((kind,), (tuple(layers),))
    smallest = min(len(v) for v in by_kind.values())
    largest = max(len(v) for v in by_kind.values())
    size = largest if largest < smallest * 1.5 else smallest
    kinds, groups = [], []
    for kind, layers in by_kind.items():
        count = -(-len(layers) // size)
        for i in range(count):
            kinds.append(kind)
            groups.append(tuple(layers[i::count]))
    return KVGroups(tuple(kinds), tuple(groups))


def num_gpu_blocks(pool_bytes: int, page_bytes: int, group_size: int) -> int:
    """int(pool // page // group_size) (kv_cache_utils.get_num_blocks): every block id is one
    page in each of group_size per-layer tensors. page = block_size x one layer's bytes/token."""
    if pool_bytes <= 0 or page_bytes <= 0 or group_size <= 0:
        return 0
    return pool_bytes // page_bytes // group_size


def blocks_per_request(kinds: tuple[str, ...], max_model_len: int, block_size_tokens: int,
                       window_tokens: int | None, max_num_batched_tokens: int) -> int:
    """Block ids one max_model_len request reserves, summed over groups: full attention
    ceil(L / B); sliding window ceil(min(W - 1 + T, L) / B) + 1 (SlidingWindowSpec: the window
    plus one chunk of T batched tokens, +1 as the window need not start on a block edge)."""
    total = 0
    for kind in kinds:
        if kind == SLIDING and window_tokens:
            held = min(window_tokens - 1 + max_num_batched_tokens, max_model_len)
            total += -(-held // block_size_tokens) + 1
        else:
            total += -(-max_model_len // block_size_tokens)
    return total


def kv_cache_tokens(num_blocks: int, num_groups: int, block_size_tokens: int) -> int:
    """'GPU KV cache size: N tokens' = num_blocks // num_groups x block_size (vLLM V1 <= 0.11;
    V0 and single-group models: num_blocks x block_size)."""
    return num_blocks // num_groups * block_size_tokens


def max_concurrency(num_blocks: int, per_request_blocks: int, max_model_len: int,
                    block_size_tokens: int, formula: str = V1) -> float:
    """'Maximum concurrency for L tokens per request: X.XXx'. V1: num_blocks / blocks one request
    reserves (get_max_concurrency_for_kv_cache_config); V0: num_blocks x B / L."""
    if formula == V0:
        return num_blocks * block_size_tokens / max_model_len
    return num_blocks / per_request_blocks if per_request_blocks else 0.0


def uniform_kinds(layer_kinds: tuple[str, ...], num_layers: int) -> tuple[str, ...]:
    """The layer kinds a spec states, or all full attention when it states none."""
    return layer_kinds or (FULL,) * num_layers
