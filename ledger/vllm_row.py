"""What one vLLM release row records (VllmRow) and the named rules its fields take; the rows
themselves are in ledger/vllm_versions.py (to 0.21) and ledger/vllm_releases.py (0.22 on)."""

from dataclasses import dataclass

from .vllm_batch import BY_MEMORY_160, rule_for

# How the profile pass is turned into 'memory the KV pool may not use' (worker code at the tag):
PEAK_FREE = "peak_free"  # init free - free after profiling: every byte since start-up
ALLOCATED = "allocated"  # torch allocated peak (weights included) + device-wide non-torch
PROFILED = "profiled"  # memory_profiling(): weights + torch peak increase + non-torch increase
# memory_profiling() from 0.27: the free-memory drop since the init snapshot (weights,
# non-torch, what torch still holds after empty_cache) + the transient peak above what torch
# holds after the pass (vllm/utils/mem_utils.py total_consumed + transient_peak_headroom)
CONSUMED = "consumed"
# How 'GPU KV cache size: N tokens' is printed (vllm/v1/core/kv_cache_utils.py at the tag)
TOKENS_PER_GROUP = "blocks // groups x block_size"
TOKENS_FROM_CONCURRENCY = "int(max_concurrency x max_model_len)"
# --block-size as a release takes it. Up to v0.18 a fixed list: the argparse choices
# (vllm/engine/arg_utils.py: {8,16,32} in docs.vllm.ai/en/v0.6.3.post1 engine_args; 64 and 128
# restored by vllm-project/vllm#11259, 2024-12-17, after #10938 had dropped them), then
# CacheConfig's BlockSize literal (docs.vllm.ai/en/v0.9.0 .. v0.10.2 vllm.config: 1, 8, 16,
# 32, 64, 128; vllm/config/cache.py@c1d8642 and docs v0.11.1, v0.16.0: with 256). From v0.20
# CacheConfig takes any whole number (vllm/config/cache.py@002f10e block_size: int =
# Field(gt=0)) and the CUDA attention backend checks it: FlashAttention, the default, needs a
# multiple of 16 (vllm/v1/attention/backends/flash_attn.py@5704f34 get_kv_cache_shape; still
# MultipleOf(16) in get_supported_kernel_block_sizes at v0.33.0).
BLOCKS_V063 = (8, 16, 32)
BLOCKS_V064 = (8, 16, 32, 64, 128)
BLOCKS_V09 = (1, 8, 16, 32, 64, 128)
BLOCKS_V011 = (1, 8, 16, 32, 64, 128, 256)
MULTIPLE_OF = 16  # block_sizes None: a multiple of this (FlashAttention's kernels)
# How the dummy sampler of V1's profile pass samples (vllm/v1/sample/ops/topk_topp_sampler.py)
FLASHINFER, TORCH, TRITON = "flashinfer", "torch", "triton"
# V1's PyTorch top-k/top-p path peaks inside logits.sort (vllm/v1/sample/ops/topk_topp_sampler.py
# apply_top_k_top_p, whose sort is the same from v0.8.0 to v0.33.0), per (request x vocabulary)
# element: the model-dtype logits (2) and their fp32 copy (4) held by the sampler, the sort's
# values (4) and int64 indices (8), and what PyTorch's sort allocates for 128 rows or more:
# segmented_sort_pairs' int64 reverse_indices (8) and CUB's third keys and values buffers in its
# temporary storage (4 + 8: DeviceSegmentedRadixSort::SortPairs without a DoubleBuffer;
# pytorch/pytorch aten/src/ATen/native/cuda/SortStable.cu launch_stable_sort_kernel,
# aten/src/ATen/cuda/cub.cuh CUB_WRAPPER, NVIDIA/cub dispatch_radix_sort.cuh 'bytes needed for
# 3rd keys buffer'). After the sort the masks, probabilities and scattered logits hold 32 at most
# (28 once the cumsum is written in place, read at v0.8.4 on).
V1_TORCH_SAMPLER_BYTES = 2 + 4 + 4 + 8 + 8 + 4 + 8
# 2 to 127 rows sort through segmented_sort_pairs_by_full_sort instead (SortStable.cu): two int2
# (segment, index) arrays (8 + 8), the keys' output radix_sort_pairs allocates (4) and CUB's third
# keys and int2 values buffers (4 + 8), in place of the reverse_indices and CUB buffers above
SEGMENTED_SORT_MIN_ROWS = 128
FULL_SORT_SAMPLER_BYTES = V1_TORCH_SAMPLER_BYTES - (8 + 4 + 8) + (8 + 8 + 4 + 4 + 8)
# Model Runner V2's own sampler (vllm/v1/worker/gpu/sample/sampler.py): no top-k/top-p sort
MRV2 = "mrv2"
# Which models a release runs on Model Runner V2 (vllm/config/vllm.py use_v2_model_runner and
# _is_default_v2_model_runner_model at the tag); everything else runs on the V1 runner
# (vllm/v1/worker/gpu_model_runner.py). vLLM's 'hybrid' is a model with Mamba-like state.
RUNNER_V1 = "V1 runner for every model"
RUNNER_LISTED_DENSE = "V2 for the listed architectures, not MoE, not quantized, no state"
RUNNER_LISTED = "V2 for the listed architectures without state layers"
RUNNER_LISTED_OR_DENSE = "V2 for the listed architectures and every dense model, no state"
RUNNER_LISTED_OR_DENSE_STATE_LISTED = ("V2 for the listed architectures and every dense model "
                                       "without state layers")
RUNNER_ALL = "V2 for every model"
# Bytes per (request x vocabulary) element Model Runner V2's dummy sampler holds in the profile
# pass: the model-dtype logits and, where the release copies them, their fp32 copy
# (Sampler.apply_sampling_params: 'Copy logits to a new FP32 tensor', unconditional to 0.27,
# skipped from 0.28 when no request needs logits processing); from 0.33 a second pass with
# SamplingParams.for_sampler_warmup() adds the fp32 pipeline (fp32 copy, FlashInfer top-k/top-p
# probabilities).
MRV2_LOGITS_AND_COPY = 2 + 4
MRV2_LOGITS_ONLY = 2
MRV2_WARMUP_PASS = 2 + 4 + 4
GRAPH_MAX_TOKENS = 512  # largest CUDA-graph capture size by default (vllm/config/vllm.py)


@dataclass(frozen=True)
class VllmRow:
    """What one range of vLLM releases does, from `version` up to the next row.

    default_gpu_memory_utilization: CacheConfig's default. formula: 'v0' or 'v1' engine (its
    concurrency formula and sampler placement). profile: PEAK_FREE / ALLOCATED / PROFILED /
    CONSUMED. context_in_budget: the CUDA context is inside the subtracted memory (ALLOCATED
    measures device-wide use; the others take their baseline after the context exists).
    graphs_logged: 'Estimated CUDA graph memory' is printed; graphs_subtracted: and taken out
    of the pool by default (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), on the V1 runner.
    Collective buffers set up with the process groups are inside the budget where the row takes
    its memory baseline before init_worker_distributed_environment (V0, and V1 to 0.10), outside
    it from 0.11 (communicators_before_baseline). sampler_bytes_per_logit: bytes the dummy
    sampler holds per (request x vocab) element in the profile pass on PyTorch's path (V0: fp32
    logits, sort values and int64 indices, probabilities, their cumulative sum, masks, the
    inverse permutation; V1: V1_TORCH_SAMPLER_BYTES, its peak inside the sort). sampler: the
    top-k/top-p path the V1 runner takes unless told (TORCH: the sort above; TRITON: Triton's
    in-place masking, 0.17 - 0.20; FLASHINFER: FlashInfer's sampling kernels, the default from
    0.21; before, opt-in with VLLM_USE_FLASHINFER_SAMPLER=1). block_sizes: the --block-size
    values the release takes (None: a multiple of MULTIPLE_OF). source: files read at `tag`.

    From 0.22 (ledger/vllm_releases.py): runner_rule and mrv2_archs say which models run on
    Model Runner V2 (ledger/vllm_runner.py); mrv2_graphs_estimated: V2's
    profile_cudagraph_memory() measures (before 0.29 it returns 0, so nothing is subtracted);
    mrv2_sampler_bytes: V2's profile-pass sampler per logit; window_in_flight: sliding-window
    and chunked-local layers reserve W - 1 + (concurrent batches x T) tokens (VllmConfig
    .max_in_flight_tokens, from 0.26), not W - 1 + T; graph_max_sm100: the largest capture
    size on SM 10.0 GPUs; triton_min_batch: the smallest batch Triton's top-k/top-p takes;
    mamba_all_chunk_aligned: mamba_cache_mode 'all' aligns the attention block to the Mamba
    chunk (to 0.31); gdn_checkpoint_alignment: align mode's block alignment for gated-DeltaNet
    layers on FlashInfer's GDN prefill, with one more state block per request (0.33; 0: none);
    startup_plan: VLLM_ENABLE_STARTUP_PLAN=1 reuses a recorded --kv-cache-memory (0.26).
    profile_keeps_hidden: the V1 runner's profile_run holds _dummy_run's hidden states (tokens
    x hidden) through the sampler pass (from 0.9.2: _dummy_run returns them with the gather;
    before, only the gather); sampler_input_copies: the (requests x hidden) tensors the
    sampler pass holds, the gather hidden_states[logit_indices] and, from 0.9.0,
    _dummy_sampler_run's torch.rand_like of it.

    encoder_rows_to_budget: profile_run zero-pads each dummy encoder output to the whole encoder
    budget (output.new_zeros((encoder_budget, hidden)) in vllm/v1/worker/gpu_model_runner.py at
    v0.11.0, v0.11.1, v0.11.2), so the cache it holds through the decoder's profile is items x
    budget rows; at v0.12.0 it pads to the largest item's tokens (max_mm_tokens_per_item), and
    from v0.13.0 (and before v0.11.0) it holds the outputs as they are.
    qwen3_video_timestamps: Qwen3-VL's largest video counts the frames that fit max_model_len
    (at most 24,576) and its soft tokens x 12.5, one video token becoming '<{t} seconds>' and
    three vision tokens (vllm/model_executor/models/qwen3_vl.py get_max_video_tokens at v0.11.0
    and v0.12.0; from v0.13.0 the soft tokens alone).
    compile_benchmarks_kernels: the default inductor_compile_config sets combo_kernels and
    benchmark_combo_kernel (vllm/config/compilation.py __post_init__, torch >= 2.9: v0.11.1 on;
    v0.11.1 shares the v0.11.0 row, so its cold starts are planned without it), so a cold
    torch.compile benchmarks kernels inside the profile (vllm_profile.compile_benchmark_peak)."""

    version: tuple[int, ...]
    tag: str
    default_gpu_memory_utilization: float
    formula: str
    profile: str
    graphs_logged: bool
    graphs_subtracted: bool
    tokens_rule: str
    sampler_bytes_per_logit: int
    source: str
    sampler: str = TORCH
    moe_workspace_kept: bool = False
    mla: bool = True
    block_sizes: tuple[int, ...] | None = BLOCKS_V011
    runner_rule: str = RUNNER_V1
    mrv2_archs: frozenset[str] = frozenset()
    mrv2_graphs_estimated: bool = False
    mrv2_sampler_bytes: int = 0
    window_in_flight: bool = False
    graph_max_sm100: int = GRAPH_MAX_TOKENS
    triton_min_batch: int = 8
    mamba_all_chunk_aligned: bool = True
    gdn_checkpoint_alignment: int = 0
    startup_plan: bool = False
    profile_keeps_hidden: bool = True
    sampler_input_copies: int = 2
    encoder_rows_to_budget: bool = False
    qwen3_video_timestamps: bool = False
    compile_benchmarks_kernels: bool = False

    @property
    def batch_tier_160(self) -> bool:
        """Whether GPUs of >= 160 GiB take 16,384 batched tokens for the API server too at
        the row's first release (ledger/vllm_batch.py's rule, read here for diff's reasons)."""
        return rule_for(self.version).kind == BY_MEMORY_160

    @property
    def pin(self) -> str:
        """The --engine spelling that picks this row."""
        return "vllm==" + ".".join(map(str, self.version))

    @property
    def name(self) -> str:
        """The releases the row covers, pip-style: 'vllm>=0.9.2,<0.11.0'."""
        from .vllm_versions import ROWS

        later = [r for r in ROWS if r.version > self.version]
        upper = ",<" + ".".join(map(str, later[0].version)) if later else ""
        return "vllm>=" + ".".join(map(str, self.version)) + upper

    @property
    def communicators_before_baseline(self) -> bool:
        """The V1 worker from 0.11.0 runs init_worker_distributed_environment (NCCL's
        communicator with its warm-up all-reduce, the custom all-reduce's buffers, the shared-
        memory broadcast) before its MemorySnapshot: 'Initialize the distributed environment
        BEFORE taking memory snapshot. This ensures NCCL buffers are allocated before we measure
        available memory' (vllm/v1/worker/gpu_worker.py init_device at v0.11.0, v0.19.0,
        v0.27.1, v0.33.0). Earlier rows (V0's worker.py, V1 to v0.10.2) snapshot first, so their
        profile counts those buffers as non-torch memory."""
        return self.formula == "v1" and self.version >= (0, 11, 0)

    @property
    def context_in_budget(self) -> bool:
        return self.profile == ALLOCATED
