"""vLLM's memory rules per release: one row per version where they change (to 0.21 here, from
0.22 in ledger/vllm_releases.py), each citing vLLM's source at that tag, and the
`--engine vllm==X` spelling that picks a row."""

import re
from dataclasses import dataclass

from .errors import SpecError
from .vllm_releases import RELEASES
from .vllm_row import (  # noqa: F401  (the names every floor imports from here)
    ALLOCATED,
    BLOCKS_V011,
    BLOCKS_V063,
    BLOCKS_V064,
    BLOCKS_V09,
    CONSUMED,
    FLASHINFER,
    MRV2,
    MULTIPLE_OF,
    PEAK_FREE,
    PROFILED,
    TOKENS_FROM_CONCURRENCY,
    TOKENS_PER_GROUP,
    TORCH,
    TRITON,
    V1_TORCH_SAMPLER_BYTES,
    VllmRow,
)

V0_WORKER = "vllm/worker/worker.py (determine_num_available_blocks)"
V1_WORKER = "vllm/v1/worker/gpu_worker.py (determine_available_memory)"
# From 0.11.1 (torch >= 2.9) the default inductor_compile_config sets combo_kernels and
# benchmark_combo_kernel (vllm/config/compilation.py __post_init__ at v0.11.1 .. v0.33.0): a cold
# torch.compile benchmarks kernels inside the profile (VllmRow.compile_benchmarks_kernels)
COMBO = dict(compile_benchmarks_kernels=True)
ENCODER_PADDED = ("vllm/v1/worker/gpu_model_runner.py profile_run: each dummy encoder output "
                  "zero-padded to encoder_budget rows (output.new_zeros), held through the "
                  "decoder's profile")
QWEN3_VIDEO = ("vllm/model_executor/models/qwen3_vl.py get_max_video_tokens: the frames that "
               "fit max_model_len x 12.5 tokens a video token")
NO_MLA = ("no MLA: vllm/model_executor/models/deepseek_v2.py DeepseekV2Attention caches "
          "Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads) with V padded "
          "to qk_head_dim; vllm/worker/cache_engine.py get_cache_block_size K + V per head")
ROWS: tuple[VllmRow, ...] = (
    VllmRow((0, 6, 3), "v0.6.3.post1", 0.90, "v0", PEAK_FREE, False, False, TOKENS_PER_GROUP,
            40, f"{V0_WORKER}: peak = init free - free after profile_run; "
            "vllm/config.py CacheConfig gpu_memory_utilization=0.90; no MLA before v0.7.1",
            mla=False, block_sizes=BLOCKS_V063),
    VllmRow((0, 6, 4), "v0.6.4.post1", 0.90, "v0", ALLOCATED, False, False, TOKENS_PER_GROUP,
            40, f"{V0_WORKER}: allocated_bytes.all.peak + (device used - torch allocated); "
            "the 'Memory profiling results: total_gpu_memory=...' line; no MLA before v0.7.1",
            mla=False, block_sizes=BLOCKS_V064),
    VllmRow((0, 6, 5), "v0.6.5", 0.90, "v0", PROFILED, False, False, TOKENS_PER_GROUP, 40,
            f"{V0_WORKER}: memory_profiling(baseline = total - init free) in vllm/utils.py; "
            f"'Memory profiling takes ... the current vLLM instance can use'; {NO_MLA} "
            "(read again at v0.7.0)", mla=False, block_sizes=BLOCKS_V064),
    VllmRow((0, 7, 1), "v0.7.1", 0.90, "v0", PROFILED, False, False, TOKENS_PER_GROUP, 40,
            f"{V0_WORKER} as v0.6.5; vllm/config.py ModelConfig.use_mla (is_deepseek_mla and "
            "not VLLM_MLA_DISABLE), get_head_size() kv_lora_rank + qk_rope_head_dim, "
            "get_num_kv_heads() 1; vllm/worker/cache_engine.py value_cache_block 0 with MLA",
            block_sizes=BLOCKS_V064),
    VllmRow((0, 8, 0), "v0.8.0", 0.90, "v1", ALLOCATED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}: allocated peak + non_torch_allocations; vllm/envs.py VLLM_USE_V1=1 "
            "by default; vllm/v1/worker/gpu_model_runner.py (v0.8.0, v0.8.5): _dummy_run "
            "returns only hidden_states[logit_indices], so profile_run holds the gather alone "
            "through _dummy_sampler_run (0.9.0 and 0.9.1, read but without a row, add its "
            "torch.rand_like copy)", block_sizes=BLOCKS_V064, profile_keeps_hidden=False,
            sampler_input_copies=1),
    VllmRow((0, 9, 2), "v0.9.2", 0.90, "v1", PROFILED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}: memory_profiling(init_snapshot) in vllm/utils/__init__.py; "
            "'Available KV cache memory'; vllm/v1/worker/gpu_model_runner.py: _dummy_run "
            "returns (hidden_states, hidden_states[logit_indices]), both held through "
            "_dummy_sampler_run, which samples from torch.rand_like of the gather",
            block_sizes=BLOCKS_V09),
    VllmRow((0, 11, 0), "v0.11.0", 0.90, "v1", PROFILED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}; V0 removed (vllm/worker/ gone); {ENCODER_PADDED}; {QWEN3_VIDEO}",
            encoder_rows_to_budget=True, qwen3_video_timestamps=True),
    VllmRow((0, 11, 2), "v0.11.2", 0.90, "v1", PROFILED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}; vllm/v1/sample/ops/topk_topp_sampler.py: FlashInfer sampling only with "
            "VLLM_USE_FLASHINFER_SAMPLER=1 ('Users must opt in explicitly'), else PyTorch's "
            f"sort; {ENCODER_PADDED}; {QWEN3_VIDEO}",
            encoder_rows_to_budget=True, qwen3_video_timestamps=True, **COMBO),
    VllmRow((0, 12, 0), "v0.12.0", 0.90, "v1", PROFILED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}; vllm/v1/worker/gpu_model_runner.py profile_run pads each dummy "
            "encoder output to max_mm_tokens_per_item, no longer to the encoder budget; "
            f"{QWEN3_VIDEO}", qwen3_video_timestamps=True, **COMBO),
    VllmRow((0, 13, 0), "v0.13.0", 0.90, "v1", PROFILED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}; vllm/v1/worker/workspace.py WorkspaceManager: fused_moe/"
            "modular_kernel.py takes its workspaces from it, kept once allocated",
            moe_workspace_kept=True, **COMBO),
    VllmRow((0, 17, 1), "v0.17.1", 0.90, "v1", PROFILED, False, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}; topk_topp_sampler.py apply_top_k_top_p: apply_top_k_top_p_triton "
            "(in place) for batches of 8 or more; FlashInfer still opt-in",
            sampler=TRITON, moe_workspace_kept=True, **COMBO),
    VllmRow((0, 18, 1), "v0.18.1", 0.90, "v1", PROFILED, True, False, TOKENS_PER_GROUP,
            V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}: profile_cudagraph_memory() estimated and logged, subtracted only "
            "with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (vllm/envs.py default '0')",
            sampler=TRITON, moe_workspace_kept=True, **COMBO),
    VllmRow((0, 20, 0), "v0.20.0", 0.92, "v1", PROFILED, True, True,
            TOKENS_FROM_CONCURRENCY, V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}: available = requested - non_kv - cudagraph_memory_estimate; "
            "vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '1'; "
            "vllm/config/cache.py gpu_memory_utilization default 0.92; "
            "vllm/v1/core/kv_cache_utils.py tokens = int(max_concurrency * max_model_len)",
            sampler=TRITON, moe_workspace_kept=True, block_sizes=None, **COMBO),
    VllmRow((0, 21, 0), "v0.21.0", 0.92, "v1", PROFILED, True, True,
            TOKENS_FROM_CONCURRENCY, V1_TORCH_SAMPLER_BYTES,
            f"{V1_WORKER}; vllm/envs.py VLLM_USE_FLASHINFER_SAMPLER defaults to True, so "
            "topk_topp_sampler.py samples with FlashInfer unless set to 0",
            sampler=FLASHINFER, moe_workspace_kept=True, block_sizes=None, **COMBO),
) + RELEASES
NEWEST = ROWS[-1]
KNOWN = "known: " + ", ".join(".".join(map(str, r.version)) for r in ROWS) + " (a row holds " \
    "until the next)"


@dataclass(frozen=True)
class VersionChoice:
    """The row a spelling picked, and a note when the version asked for is not a row's."""

    row: VllmRow
    asked: str
    note: str = ""


def parse_version(text: str, field: str = "--engine") -> tuple[int, ...]:
    """'0.11' -> (0, 11); '0.6.4.post1' and '0.9.1.dev705+g01220ce8' keep their numbers."""
    match = re.fullmatch(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.+\-]?\w[\w.+\-]*)?\s*", text)
    if not match:
        raise SpecError(field, text, "a vLLM version such as 0.11 or 0.10.2")
    return tuple(int(g) for g in match.groups() if g is not None)


def choose(spec: str, field: str = "--engine") -> VersionChoice:
    """'vllm' -> the newest row; 'vllm==0.11', 'vllm>=0.21', 'vllm 0.10.2' -> the row that
    covers that version; a version past the newest row or before the oldest is given the
    nearest row, and the note says so."""
    text = spec.strip().lower()
    rest = text[len("vllm"):].strip() if text.startswith("vllm") else None
    if rest is None:
        raise SpecError(field, spec, "vllm, vllm==X.Y or vllm>=X.Y")
    if not rest:
        return VersionChoice(NEWEST, "vllm", f"vllm: the newest rules known "
                             f"({NEWEST.tag}); pin one with --engine vllm==X.Y")
    op = re.match(r"(==|>=|=|@)?\s*", rest)
    version = parse_version(rest[op.end():], field)
    return row_for(version, ".".join(map(str, version)))


def row_for(version: tuple[int, ...], asked: str) -> VersionChoice:
    """The last row at or before `version`; before the first row, the first (said so); past
    the newest release read, the newest row (said so)."""
    key = version + (0,) * (3 - len(version))
    if key < ROWS[0].version:
        return VersionChoice(ROWS[0], asked, f"vLLM {asked} is older than any known rules: "
                             f"the nearest row, {ROWS[0].tag}, is used")
    row = [r for r in ROWS if r.version <= key][-1]
    note = ""
    if key[:2] > NEWEST_READ:
        newest = ".".join(map(str, NEWEST_READ))
        note = (f"vLLM {asked} is newer than the releases read ({newest}): the nearest row, "
                f"{row.tag}, is used")
    return VersionChoice(row, asked, note)


NEWEST_READ = (0, 33)  # the newest release whose source the rows were checked against


def check_block_size(row: VllmRow, size: int, field: str = "--block-size") -> int:
    """A block size the release's vLLM takes, else one error naming what it takes."""
    if row.block_sizes is None:
        if size % MULTIPLE_OF == 0 and size > 0:
            return size
        allowed = f"a multiple of {MULTIPLE_OF} (FlashAttention's kernel blocks)"
    elif size in row.block_sizes:
        return size
    else:
        allowed = "one of " + ", ".join(map(str, row.block_sizes))
    raise SpecError(field, size, f"{row.name} takes {allowed}")


def row(version: str) -> VllmRow:
    """The row covering a version string ('0.6.5', '0.10.2')."""
    return row_for(parse_version(version, "version"), version).row
