"""vLLM's memory rules from 0.22 to 0.33, one row where a rule the ledger models changes, each
citing the release's source at its tag (read from the PyPI wheels). Releases read with no row
of their own (0.22.1, 0.25.1, 0.27.1, 0.31.0) change nothing these rows model."""

from .vllm_row import (
    CONSUMED,
    FLASHINFER,
    MRV2_LOGITS_AND_COPY,
    MRV2_LOGITS_ONLY,
    MRV2_WARMUP_PASS,
    PROFILED,
    RUNNER_ALL,
    RUNNER_LISTED,
    RUNNER_LISTED_DENSE,
    RUNNER_LISTED_OR_DENSE,
    RUNNER_LISTED_OR_DENSE_STATE_LISTED,
    TOKENS_FROM_CONCURRENCY,
    V1_TORCH_SAMPLER_BYTES,
    VllmRow,
)

# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES in vllm/config/vllm.py at each tag
V2_022 = frozenset({"Qwen3ForCausalLM"})
V2_023 = V2_022 | {"LlamaForCausalLM", "MistralForCausalLM"}
V2_024 = V2_023 | {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}
V2_025 = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
V2_026 = V2_025 | {"InklingForCausalLM", "InklingForConditionalGeneration",
                   "LongcatFlashNgramForCausalLM"}
V2_027 = V2_026 | {"KimiK3ForConditionalGeneration"}
V2_028 = V2_027 | {"DeepseekV4ForCausalLM"}

WORKER = "vllm/v1/worker/gpu_worker.py (determine_available_memory)"
V2_RUNNER = "vllm/v1/worker/gpu/model_runner.py"
SELECT = "vllm/config/vllm.py use_v2_model_runner, _is_default_v2_model_runner_model"
NO_V2_GRAPHS = (f"{V2_RUNNER} profile_cudagraph_memory() returns 0: on V2 nothing is "
                "subtracted for graphs, captured after the pool")
V2_SAMPLER = (f"{V2_RUNNER} _dummy_sampler_run: the logits and their fp32 copy "
              "(vllm/v1/worker/gpu/sample/sampler.py apply_sampling_params), Gumbel sampling in "
              "a Triton kernel, no top-k/top-p")
# The V1-runner rules every row below keeps from v0.21.0 (ledger/vllm_versions.py)
KEPT = dict(sampler=FLASHINFER, moe_workspace_kept=True, block_sizes=None,
            compile_benchmarks_kernels=True)


def _row(version: tuple[int, ...], profile: str, source: str, **rules) -> VllmRow:
    """A V1-engine row with 0.92, the CUDA-graph estimate subtracted (V1 runner), the token
    count from max concurrency, and the 0.21 V1-runner sampler and MoE workspace rules."""
    return VllmRow(version, "v" + ".".join(map(str, version)), 0.92, "v1", profile, True, True,
                   TOKENS_FROM_CONCURRENCY, V1_TORCH_SAMPLER_BYTES, source, **(KEPT | rules))


V022 = dict(runner_rule=RUNNER_LISTED_DENSE, mrv2_archs=V2_022,
            mrv2_sampler_bytes=MRV2_LOGITS_AND_COPY)
V026 = dict(runner_rule=RUNNER_LISTED_OR_DENSE, mrv2_archs=V2_026,
            mrv2_sampler_bytes=MRV2_LOGITS_AND_COPY, window_in_flight=True, startup_plan=True)
V028 = V026 | dict(runner_rule=RUNNER_LISTED_OR_DENSE_STATE_LISTED, mrv2_archs=V2_028,
                   mrv2_sampler_bytes=MRV2_LOGITS_ONLY, graph_max_sm100=1024)
V029 = V028 | dict(runner_rule=RUNNER_ALL, mrv2_graphs_estimated=True)
V030 = V029 | dict(triton_min_batch=1)
V032 = V030 | dict(mamba_all_chunk_aligned=False)

RELEASES: tuple[VllmRow, ...] = (
    _row((0, 22, 0), PROFILED,
         f"{SELECT}: Model Runner V2 by default for Qwen3ForCausalLM, not MoE, not quantized "
         f"('hybrid/mamba models' unsupported); {NO_V2_GRAPHS}; {V2_SAMPLER}; {WORKER} and the "
         "V1 runner as v0.21.0", **V022),
    _row((0, 23, 0), PROFILED,
         f"{SELECT}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES adds LlamaForCausalLM and "
         "MistralForCausalLM", **(V022 | dict(mrv2_archs=V2_023))),
    _row((0, 24, 0), PROFILED,
         f"{SELECT}: the list adds DeepseekV2ForCausalLM, Qwen2MoeForCausalLM, "
         "GraniteMoeForCausalLM, and MoE and quantized checkpoints of a listed architecture run "
         "on V2 (state layers still unsupported)",
         **(V022 | dict(runner_rule=RUNNER_LISTED, mrv2_archs=V2_024))),
    _row((0, 25, 0), PROFILED,
         f"{SELECT}: V2 for every model that is not MoE and has no state layers, and for the "
         "listed MoE architectures (DeepseekV2, Qwen2Moe, GraniteMoe)",
         **(V022 | dict(runner_rule=RUNNER_LISTED_OR_DENSE, mrv2_archs=V2_025))),
    _row((0, 26, 0), PROFILED,
         "vllm/v1/kv_cache_interface.py SlidingWindowSpec and ChunkedLocalAttentionSpec "
         "reserve max_in_flight_tokens (vllm/config/vllm.py: max_concurrent_batches x "
         "max_num_batched_tokens; 2 batches with async scheduling on the V1 runner, pp + 1 on "
         "V2), not max_num_batched_tokens; vllm/v1/worker/startup_plan.py: "
         "VLLM_ENABLE_STARTUP_PLAN=1 (default 0) reapplies a recorded --kv-cache-memory; the "
         "V2 list adds Inkling and LongcatFlashNgram", **V026),
    _row((0, 27, 0), CONSUMED,
         f"{WORKER}: non_kv_cache_memory = total_consumed (init free - free after profiling) + "
         "transient_peak_headroom (torch peak - torch allocated after) "
         "(vllm/utils/mem_utils.py memory_profiling); 'Memory profiling takes ... total "
         "consumed (from mem_get_info)'; the V2 list adds KimiK3",
         **(V026 | dict(mrv2_archs=V2_027))),
    _row((0, 28, 0), CONSUMED,
         "vllm/engine/arg_utils.py get_batch_defaults: >= 160 GiB GPUs take 16,384 batched "
         "tokens and 1,024 sequences for both entry points; vllm/config/vllm.py "
         "_set_cudagraph_sizes: largest capture 1,024 on SM 10.x (B200, GB200, B300); "
         f"{SELECT}: V2 also for state-layer models of a listed architecture, the list adds "
         "DeepseekV4; vllm/v1/worker/gpu/sample/sampler.py: no fp32 copy unless a request "
         "needs logits processing (the dummy pass needs none); vllm/v1/core/kv_cache_utils.py "
         "'GPU KV cache size: N tokens, Maximum concurrency ...' on one line", **V028),
    _row((0, 29, 0), CONSUMED,
         f"{SELECT}: V2 for every model unless a feature it lacks is asked for; "
         "vllm/v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory: V2 measures its "
         "graphs (FULL graphs extrapolated from samples), subtracted as on the V1 runner",
         **V029),
    _row((0, 30, 0), CONSUMED,
         "vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: Triton for every batch "
         "size (before: 8 or more); vllm/v1/core/kv_cache_utils.py '%s KV cache size' names "
         "the device type", **V030),
    _row((0, 32, 0), CONSUMED,
         "vllm/platforms/interface.py _align_hybrid_block_size: mamba_cache_mode 'all' sizes "
         "the attention block as 'align' does (the lcm with the Mamba chunk size is gone)",
         **V032),
    _row((0, 33, 0), CONSUMED,
         f"{V2_RUNNER} _dummy_sampler_run: a second pass with "
         "SamplingParams.for_sampler_warmup() (fp32 copy, top-k/top-p) so the profile pays for "
         "warmup_kernels' fp32 pipeline; vllm/platforms/interface.py _align_hybrid_block_size "
         "and vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py: in align mode, "
         "gated-DeltaNet layers on FlashInfer's GDN prefill (Hopper) align blocks to "
         "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64 and hold one prefill checkpoint block more "
         "(vllm/v1/kv_cache_interface.py MambaSpec 2 + num_prefill_checkpoint_blocks)",
         **(V032 | dict(mrv2_sampler_bytes=MRV2_WARMUP_PASS, gdn_checkpoint_alignment=64))),
)
