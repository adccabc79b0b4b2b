"""TensorRT-LLM's table for a pasted launch line (scenario/launch_line.py reads it):
`trtllm-serve [serve] MODEL [options]`, with trtllm-serve's own option names (click: exactly
as written, underscores; a switch takes no value) and defaults. Read from NVIDIA/TensorRT-LLM:
tensorrt_llm/commands/serve.py at commit 00209af149e7774406881a37283dce303571eb11 (the serve
command's click options; the group runs serve when the first word is not a subcommand), and
--extra_llm_api_options / --config YAML, which overrides the options (its keys are the LLM
API's: tensorrt_llm/llmapi/llm_args.py at commit 0004396720054fd8e205cbf616f21f0b57c6b412,
KvCacheConfig: dtype auto, tokens_per_block 32, free_gpu_memory_fraction 0.9,
enable_block_reuse true). A value not given takes TensorRT-LLM's default, which the ledger
holds where servecap models it (ledger/engines.py: free_gpu_memory_fraction 0.9, 32 tokens per
block; max_seq_len from the model's config)."""

from pathlib import Path

from servecap.ledger.errors import SpecError

from .launch_line import (
    BOOL,
    COUNT,
    FRACTION,
    TEXT,
    Dialect,
    choice,
    count,
    expert_parallel,
    fraction,
)

NAME = "trtllm-serve"
MODELLED = {
    "--tp_size": ("parallel.tensor_parallel_size", COUNT),
    "--pp_size": ("parallel.pipeline_parallel_size", COUNT),
    "--ep_size": ("_ep_size", COUNT),
    "--max_batch_size": ("scheduler.max_num_seqs", COUNT),
    "--max_num_tokens": ("scheduler.max_num_batched_tokens", COUNT),
    "--max_seq_len": ("scheduler.max_model_len", COUNT),
    "--kv_cache_free_gpu_memory_fraction": ("memory.free_gpu_memory_fraction", FRACTION),
    "--revision": ("model.revision", TEXT),
    "--enable_chunked_prefill": ("scheduler.enable_chunked_prefill", BOOL),
    "--backend": ("", "backend"),
    "--extra_llm_api_options": ("", "yaml"),
}
ALIASES = {"--tensor_parallel_size": "--tp_size", "--pipeline_parallel_size": "--pp_size",
           "--moe_expert_parallel_size": "--ep_size", "--config": "--extra_llm_api_options",
           "--free_gpu_memory_fraction": "--kv_cache_free_gpu_memory_fraction",
           "--context_parallel_size": "--cp_size",
           "--moe_cluster_parallel_size": "--cluster_size"}
IGNORED_VALUE = frozenset("""
--tokenizer --custom_tokenizer --host --port --log_level --custom_module_dirs --gpus_per_node
--num_postprocess_workers --reasoning_parser --tool_parser --metadata_server_config_file
--server_role --otlp_traces_endpoint --disagg_cluster_uri --media_io_kwargs --chat_template
""".split())
IGNORED_BOOL = frozenset({"--trust_remote_code", "--fail_fast_on_attention_window_too_large"})
NEUTRAL = {"--cp_size": "1", "--cluster_size": "1", "--max_beam_width": "1"}
_SUBCOMMANDS = ("grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve")

# The YAML's keys (the LLM API's), each a Scenario field, ignored, or refused.
YAML_MODELLED = {
    "tensor_parallel_size": ("parallel.tensor_parallel_size", COUNT),
    "pipeline_parallel_size": ("parallel.pipeline_parallel_size", COUNT),
    "moe_expert_parallel_size": ("_ep_size", COUNT),
    "max_batch_size": ("scheduler.max_num_seqs", COUNT),
    "max_num_tokens": ("scheduler.max_num_batched_tokens", COUNT),
    "max_seq_len": ("scheduler.max_model_len", COUNT),
    "enable_chunked_prefill": ("scheduler.enable_chunked_prefill", BOOL),
    # dtype: 'The data type to use for the model' (tensorrt_llm/llmapi/llm_args.py): the model
    # dtype, as vLLM's --dtype
    "revision": ("model.revision", TEXT), "dtype": ("dtypes.dtype", "dtype"),
    "kv_cache_config.dtype": ("dtypes.kv_cache_dtype", "kv"),
    "kv_cache_config.free_gpu_memory_fraction": ("memory.free_gpu_memory_fraction", FRACTION),
    "kv_cache_config.tokens_per_block": ("scheduler.block_size", COUNT),
    "kv_cache_config.max_tokens": ("memory.max_tokens", COUNT),
    "kv_cache_config.enable_block_reuse": ("scheduler.enable_prefix_caching", BOOL),
}
YAML_IGNORED = frozenset("""
print_iter_log enable_iter_perf_stats enable_iter_req_stats return_perf_metrics stream_interval
num_postprocess_workers trust_remote_code tokenizer tokenizer_mode skip_tokenizer_init
disable_overlap_scheduler scheduler_config garbage_collection_gen0_threshold enable_autotuner
iter_stats_max_iterations request_stats_max_iterations otlp_traces_endpoint backend
kv_cache_config.event_buffer_max_size kv_cache_config.enable_partial_reuse
kv_cache_config.copy_on_partial_reuse kv_cache_config.onboard_blocks
kv_cache_config.secondary_offload_min_priority kv_cache_config.iteration_stats_interval
kv_cache_config.attention_dp_events_gather_period_ms kv_cache_config.kv_cache_event_hash_algo
""".split())
YAML_REFUSED = {
    "cuda_graph_config": "changes the CUDA graphs captured",
    "speculative_config": "adds a draft model's weights and KV (plan does not model it)",
    "lora_config": "holds LoRA adapters beside the weights", "enable_lora": "holds LoRA "
    "adapters beside the weights", "enable_attention_dp": "keeps a KV pool per attention "
    "data-parallel rank", "moe_config": "changes the MoE kernels' workspaces",
    "cache_transceiver_config": "holds KV transfer buffers", "cp_config": "splits each "
    "request's KV across ranks", "context_parallel_size": "splits each request's KV across "
    "ranks", "moe_tensor_parallel_size": "splits the experts in a way servecap does not plan",
    "moe_cluster_parallel_size": "splits the experts in a way servecap does not plan",
    "sparse_attention_config": "changes what the KV cache keeps",
    "quant_config": "quantizes the weights at load", "build_config": "builds a TensorRT engine",
    "kv_cache_config.max_gpu_total_bytes": "caps the KV pool at a size of its own",
    "kv_cache_config.host_cache_size": "adds a host KV tier",
    "kv_cache_config.max_attention_window": "changes the context each layer keeps",
    "kv_cache_config.mamba_ssm_cache_dtype": "changes a hybrid's state bytes",
    "kv_cache_config.use_uvm": "puts the KV cache in unified memory",
    "kv_cache_config.cross_kv_cache_fraction": "splits the pool for cross attention",
}
# kv_cache_config.dtype: auto keeps the checkpoint's; fp8_ds_mla and nvfp4 are not modelled.
_KV = {"auto": None, "fp8": "fp8", "float16": "fp16", "bfloat16": "bf16"}
_DTYPE = {"auto": None, "float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def _backend(value: str, where: str, path: str) -> dict:
    """--backend: the PyTorch backend's budget is the one servecap plans."""
    if value != "pytorch":
        raise SpecError(where, value, "pytorch (servecap plans the PyTorch backend's KV "
                        "budget; a TensorRT engine's limits are fixed when it is built)")
    return {}


def _yaml(value: str, where: str, path: str) -> dict:
    """--extra_llm_api_options FILE: its keys override the options (the file is read from the
    current directory, as trtllm-serve reads it)."""
    import yaml

    try:
        config = yaml.safe_load(Path(value).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(where, value, f"a YAML file servecap can read ({exc.strerror or exc})") \
            from None
    except yaml.YAMLError as exc:
        raise SpecError(where, value, f"valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise SpecError(where, value, "a YAML mapping of LLM API options (kv_cache_config: "
                        "{dtype: fp8} ...)")
    out, ignored = {}, []
    for key, item in _flat(config):
        if key in YAML_MODELLED:
            out.update(_yaml_value(key, item, value))
        elif key in YAML_IGNORED or key.split(".")[0] in YAML_IGNORED:
            ignored.append(key)
        else:
            why = YAML_REFUSED.get(key) or YAML_REFUSED.get(key.split(".")[0])
            allowed = f"not modelled: it {why}" if why else "not an LLM API option " \
                "servecap knows as modelled or ignored"
            raise SpecError(key, item, allowed + "; remove it to plan without it", value)
    return {"_yaml": out, "_ignored": [f"{value}: {key}" for key in ignored]}


def _flat(config: dict, prefix: str = ""):
    """(dotted key, value) pairs: kv_cache_config's keys one by one, other sections whole."""
    for key, item in config.items():
        name = f"{prefix}{key}"
        if name == "kv_cache_config" and isinstance(item, dict):
            yield from _flat(item, "kv_cache_config.")
        else:
            yield name, item


def _yaml_value(key: str, item, source: str) -> dict:
    path, kind = YAML_MODELLED[key]
    try:
        if kind == BOOL:
            if not isinstance(item, bool):
                raise SpecError(key, item, "true or false")
            return {path: item}
        if kind == COUNT:
            return {path: count("x" if isinstance(item, bool | float) else item, key)}
        if kind == FRACTION:
            return {path: fraction("x" if isinstance(item, bool) else item, key)}
        if kind == "kv":
            return {path: choice(_KV, item, key, " (fp8_ds_mla and nvfp4 are not modelled)")}
        if kind == "dtype":
            return {path: choice(_DTYPE, item, key)}
        return {path: str(item)}
    except SpecError as exc:
        raise SpecError(key, item, exc.allowed, source) from None


def _finish(values: dict, name: str) -> dict:
    """The YAML's values over the options (wherever it stood in the line), then --ep_size
    against --tp_size."""
    values = {**values, **values.get("_yaml", {})}
    values.pop("_yaml", None)
    return expert_parallel(values, f"{name} --ep_size", "--tp_size")


def _entry(args: list[str]) -> list[str] | None:
    if not args or args[0].rsplit("/", 1)[-1] != NAME:
        return None
    rest = args[1:]
    if rest[:1] == ["serve"]:
        return rest[1:]
    if rest[:1] and rest[0] in _SUBCOMMANDS:
        raise SpecError(NAME, rest[0], "trtllm-serve MODEL (or trtllm-serve serve MODEL): "
                        "the other subcommands are not read")
    return rest


TRTLLM = Dialect(
    engine="trtllm", name=NAME, entry=_entry, modelled=MODELLED, aliases=ALIASES,
    usage="trtllm-serve MODEL [options]", ignored_value=IGNORED_VALUE,
    ignored_bool=IGNORED_BOOL, neutral=NEUTRAL, readers={"backend": _backend, "yaml": _yaml},
    finish=_finish)
