"""The KV offload tier in a workbook (with --kv-offloading-size): vLLM's knobs as Inputs, and
host rows on the Ledger sheet, formulas over them (ledger/kv_offload.py, cell for cell). The
rows are host memory: no device line sums them."""

from servecap.ledger.kv_offload import (
    PAGE,
    SHARED_REGION_FROM,
    OffloadSpec,
)

from . import style
from .source import WorkbookSource

_LMCACHE = 'kv_offloading_backend="lmcache"'
_BUFFER = (f"IF({_LMCACHE},INT(kv_offloading_size_gib/kv_offload_world_size*2^30),"
           "INT(kv_offloading_size_gib*2^30))")
# one chunk as allocated: LMCache's chunk_size tokens of the rank's KV rounded up to 4 KiB;
# vLLM's block of every copy rounded up to kv_offload_align_bytes (1 before v0.33)
ROWS = [
    ("kv_offload_chunk_bytes", "offload chunk (host)",
     f"=IF({_LMCACHE},-INT(-kv_offload_chunk_tokens*kv_offload_token_bytes/{PAGE})*{PAGE},"
     "-INT(-kv_offload_block_bytes*kv_offload_copies/kv_offload_align_bytes)"
     "*kv_offload_align_bytes)", style.BYTES,
     "lmcache: round_up(chunk_size x KV per token, 4 KiB); native: round_up(GPU block x "
     "copies, the release's alignment)"),
    ("kv_offload_num_chunks", "offload chunks", f"=INT({_BUFFER}/kv_offload_chunk_bytes)",
     style.BLOCKS, "lmcache: int(size / ranks x 2^30) // chunk on each rank; native: "
     "int(size x 2^30) // chunk"),
    ("kv_offload_bytes_per_rank", "KV offload tier (host, one rank)",
     f"=IF({_LMCACHE},{_BUFFER},INT(kv_offload_num_chunks*kv_offload_chunk_bytes"
     "/kv_offload_world_size))", style.BYTES,
     "host memory, not this device: lmcache allocates its whole share on each rank; native "
     "holds chunks x chunk / ranks"),
    ("kv_offload_tokens", "KV offload tier, tokens",
     f"=kv_offload_num_chunks*IF({_LMCACHE},kv_offload_chunk_tokens,block_size_tokens)",
     style.TOKENS, "chunks x tokens a chunk (lmcache: chunk_size; native: one GPU block)"),
]


def offload_inputs(src: WorkbookSource) -> list[tuple]:
    """What-if rows: the size, the backend, and how the release splits it. None without a
    tier."""
    spec = src.serve.kv_offload
    if spec is None:
        return []
    tier = deployed(src)
    return [
        ("kv_offloading_size_gib", spec.size_gib, style.GIB, "GiB",
         "vLLM's --kv-offloading-size: host memory over all tp x pp ranks"),
        ("kv_offloading_backend", spec.backend, None, "text",
         "--kv-offloading-backend: native or lmcache"),
        ("kv_offload_world_size", spec.world_size, style.COUNT, "ranks",
         "tp x pp: the ranks the size is split over"),
        ("kv_offload_copies", copies(spec), style.COUNT, "copies",
         "native: one GPU block a rank in each host block (1: an MLA latent over tp alone, "
         "vLLM >= 0.33)"),
        ("kv_offload_align_bytes", PAGE if spec.release >= SHARED_REGION_FROM else 1,
         style.BYTES, "bytes", "native: host row alignment (4 KiB from vLLM 0.33, 1 before)"),
        ("kv_offload_chunk_tokens", spec.chunk_size, style.TOKENS, "tokens",
         "lmcache: chunk_size (its default 256)"),
        ("kv_offload_block_bytes", tier.block_bytes, style.BYTES, "bytes",
         "native: one GPU block of a rank, every layer it holds (the plan's; a hybrid's page "
         "is not KV per token x block_size)"),
        ("kv_offload_token_bytes", tier.token_bytes, style.BYTES, "bytes",
         "lmcache: a rank's KV per token (the plan's)"),
    ]


def deployed(src: WorkbookSource):
    """The tier plan --json prints: the deployment's binding rank under its engine (only
    vLLM has the flag, so the plain engine's one-device ledger is not the figure)."""
    return src.resolved().plan.kv_offload


def copies(spec: OffloadSpec) -> int:
    return 1 if spec.replicated and spec.release >= SHARED_REGION_FROM else spec.world_size


def known(src: WorkbookSource) -> dict[str, object]:
    """The deployment's own figures for the rows (cached beside the formulas)."""
    tier = deployed(src)
    if tier is None:
        return {}
    return {"kv_offload_chunk_bytes": tier.chunk_bytes, "kv_offload_num_chunks": tier.num_chunks,
            "kv_offload_bytes_per_rank": tier.bytes_per_rank, "kv_offload_tokens": tier.tokens}



