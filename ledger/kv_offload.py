"""KV offload tiers in host memory: vLLM's --kv-offloading-size (GiB) with
--kv-offloading-backend native or lmcache. What each rank holds in host memory, and what the
tier holds in tokens.

native (vLLM's OffloadingConnector, CPUOffloadingSpec): the flag's GiB is the buffer summed
over the tp x pp ranks of one engine (CacheConfig.kv_offloading_size: 'When TP > 1, this is
the total buffer size summed across all TP ranks'); vllm/config/vllm.py passes
cpu_bytes_to_use = size x 2^30. A host block holds one GPU block (blocks_per_chunk 1: the flag
sets no block_size) of every worker, so
    num_blocks = int(size x 2^30) // (worker block bytes x world_size)
(vllm/v1/kv_offload/cpu/spec.py at v0.15.0, v0.19.0 and v0.25.0). From v0.33.0 the blocks
live in one shared /dev/shm region and each chunk row is rounded up to the page (4,096 B,
SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT); an MLA model over tensor parallelism alone keeps
one copy for every rank (replicated_layout: its latent is the same on each rank,
vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py). At v0.12.0 the flag set
num_cpu_blocks 0, which CPUOffloadingSpec refuses ('num_cpu_blocks must be specified'): the
native tier is planned from v0.15.0, the first release read where it starts. Releases between
two read ones follow the older one's rules.

lmcache (LMCacheConnectorV1, read at v0.12.0, v0.15.0, v0.19.0 and v0.22.0): vLLM sets LMCache's
max_local_cpu_size to size / (tp x pp) GiB on each rank, and every rank allocates that much
pinned memory of its own (MixedMemoryAllocator(int(max_local_cpu_size x 1024**3)), LMCache
issue #2901). A chunk holds chunk_size tokens of the rank's KV in LMCache's KV_2LTD format
(2 x layers x chunk x heads x head_size x dtype bytes; MLA: 1 x layers x chunk x latent), each
rounded up to 4 KiB by its TensorMemoryAllocator (LMCache's
lmcache/v1/storage_backend/local_cpu_backend.py, calculate_chunk_budget). From v0.25.0 (read
there and at v0.33.0) the lmcache backend is LMCache's multi-process server and the flag's
size is not passed on (its capacity is the server's): refused."""

import math
from dataclasses import dataclass, replace

from .errors import SpecError
from .lines import Line
from .units import plural

TIERS = ("native", "lmcache")
GIB = 1 << 30
PAGE = 4096  # the host page: v0.33's shared-region row alignment, LMCache's chunk alignment
FLAG_FROM = (0, 12, 0)  # the first release read with --kv-offloading-size
NATIVE_FROM = (0, 15, 0)  # the first release read whose native tier starts (v0.12.0: refuses)
SHARED_REGION_FROM = (0, 33, 0)  # page-aligned rows in one /dev/shm region; MLA single copy
LMCACHE_MP_FROM = (0, 25, 0)  # lmcache backend is the MP server: the size is not passed on
LMCACHE_CHUNK_SIZE = 256  # LMCache's chunk_size default
MAX_SIZE_GIB = 1 << 20  # a PiB of host memory: a larger figure is a typo


@dataclass(frozen=True)
class OffloadSpec:
    """--kv-offloading-size GiB (over the world_size = tp x pp ranks of one engine) with
    --kv-offloading-backend, under a release's rules. replicated: an MLA model over tensor
    parallelism alone (one host copy serves every rank, native from v0.33)."""

    size_gib: float
    backend: str = "native"
    world_size: int = 1
    release: tuple[int, ...] = (0, 33, 0)
    replicated: bool = False
    chunk_size: int = LMCACHE_CHUNK_SIZE

    def __post_init__(self) -> None:
        size = self.size_gib
        if isinstance(size, bool) or not isinstance(size, (int, float)) \
                or not math.isfinite(size) or size <= 0 or size > MAX_SIZE_GIB:
            raise SpecError("--kv-offloading-size", size, f"a number of GiB > 0 and at most "
                            f"{MAX_SIZE_GIB:,} (host memory over all tp x pp ranks)")
        if self.backend not in TIERS:
            raise SpecError("--kv-offloading-backend", self.backend, " or ".join(TIERS))
        if self.release < FLAG_FROM:
            raise SpecError("--kv-offloading-size", size, f"vLLM >= {_tag(FLAG_FROM)} (the "
                            f"release first read with the flag; this plan follows "
                            f"{_tag(self.release)})")
        if self.backend == "native" and self.release < NATIVE_FROM:
            raise SpecError("--kv-offloading-backend", "native", f"vLLM {_tag(self.release)} "
                            "sets num_cpu_blocks 0 and its OffloadingConnector refuses to "
                            "start: use lmcache there, or a newer release")
        if self.backend == "lmcache" and self.release >= LMCACHE_MP_FROM:
            raise SpecError("--kv-offloading-backend", "lmcache", f"vLLM {_tag(self.release)} "
                            "hands the lmcache tier to LMCache's own server and does not pass "
                            "--kv-offloading-size on: its capacity is the server's, not this "
                            "flag's (use native, or pin --engine vllm==0.19)")
        if not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise SpecError("chunk_size", self.chunk_size, "a whole number of tokens >= 1")


@dataclass(frozen=True)
class OffloadTier:
    """What the tier holds: host bytes on each rank, tokens (every rank holds its share of the
    same tokens), the chunks it is cut into and how many tokens and bytes each one is."""

    tier: str
    bytes_per_rank: int
    tokens: int
    num_chunks: int
    chunk_tokens: int
    chunk_bytes: int  # one chunk as allocated (every copy, padding included)
    how: str
    block_bytes: int = 0  # one GPU block of this rank, every layer it holds (a hybrid's page)
    token_bytes: int = 0  # this rank's KV per token

    def requests(self, tokens_per_request: int) -> int:
        """Whole requests of this many tokens the tier holds."""
        return self.tokens // max(tokens_per_request, 1)


def offload_tier(spec: OffloadSpec, block_bytes: int, block_size: int,
                 kv_bytes_per_token: int) -> OffloadTier:
    """One rank's host tier: block_bytes is one GPU block of this rank (every layer it holds),
    kv_bytes_per_token the rank's KV per token (both at the KV cache dtype)."""
    tier = _native(spec, block_bytes, block_size) if spec.backend == "native" \
        else _lmcache(spec, kv_bytes_per_token)
    return replace(tier, block_bytes=block_bytes, token_bytes=kv_bytes_per_token)


def _native(spec: OffloadSpec, block_bytes: int, block_size: int) -> OffloadTier:
    shared = spec.release >= SHARED_REGION_FROM
    copies = 1 if spec.replicated and shared else spec.world_size
    raw = block_bytes * copies
    chunk = -(-raw // PAGE) * PAGE if shared else raw
    total = int(spec.size_gib * GIB)
    chunks = total // chunk if chunk else 0
    where = "one shared /dev/shm region, rows rounded to 4 KiB" if shared \
        else "pinned tensors on each rank"
    how = (f"native {_size(spec)} GiB over {plural(spec.world_size, 'rank')}: {total:,} B // "
           f"({block_bytes:,} B a block x {copies} cop{'y' if copies == 1 else 'ies'}"
           + (f" = {chunk:,} B aligned" if chunk != raw else "") + f") = {chunks:,} blocks x "
           f"{block_size} tokens; {where}")
    return OffloadTier("cpu", chunks * chunk // spec.world_size, chunks * block_size, chunks,
                       block_size, chunk, how)


def _lmcache(spec: OffloadSpec, kv_bytes_per_token: int) -> OffloadTier:
    per_rank_gib = spec.size_gib / spec.world_size
    buffer = int(per_rank_gib * GIB)
    raw = spec.chunk_size * kv_bytes_per_token
    chunk = -(-raw // PAGE) * PAGE
    chunks = buffer // chunk if chunk else 0
    how = (f"lmcache max_local_cpu_size {_size(spec)} / {plural(spec.world_size, 'rank')} = "
           f"{per_rank_gib:g} GiB pinned on each rank: {buffer:,} B // ({spec.chunk_size} tokens "
           f"x {kv_bytes_per_token:,} B" + (f" = {chunk:,} B aligned" if chunk != raw else "")
           + f") = {chunks:,} chunks x {spec.chunk_size} tokens")
    return OffloadTier("cpu", buffer, chunks * spec.chunk_size, chunks, spec.chunk_size, chunk,
                       how)


def size_for_tokens(spec: OffloadSpec, tokens: int, block_bytes: int, block_size: int,
                    kv_bytes_per_token: int) -> float:
    """The smallest --kv-offloading-size, in hundredths of a GiB, whose tier holds `tokens`
    (offload_tier run forward at each candidate, so the rounding is the release's own)."""
    def held(gib: float) -> int:
        return offload_tier(replace(spec, size_gib=gib), block_bytes, block_size,
                            kv_bytes_per_token).tokens
    one = offload_tier(replace(spec, size_gib=1.0), block_bytes, block_size, kv_bytes_per_token)
    if one.tokens == 0:
        raise SpecError("--kv-offloading-size", spec.size_gib, "a tier of one block or chunk "
                        f"per GiB at least ({one.chunk_bytes:,} B a chunk)")
    cents = max(1, math.ceil(tokens / one.tokens * 100) - 1)
    while held(cents / 100) < tokens:
        cents += 1
    return cents / 100


def offload_lines(tier: OffloadTier | None, tokens_per_request: int) -> tuple[Line, ...]:
    """The host line of one rank: not device memory."""
    if tier is None:
        return ()
    return (Line("kv_offload", "KV offload tier (CPU)", tier.bytes_per_rank,
                 f"{tier.how}; holds {tier.tokens:,} tokens = "
                 f"{tier.requests(tokens_per_request):,} requests of "
                 f"{tokens_per_request:,} tokens"),)


def _size(spec: OffloadSpec) -> str:
    return f"{spec.size_gib:g}"


def _tag(release: tuple[int, ...]) -> str:
    return "v" + ".".join(map(str, release))
