"""vLLM's table for a pasted launch line (scenario/launch_line.py reads it): `vllm serve MODEL
[flags]` or `python -m vllm.entrypoints.openai.api_server --model MODEL ...`, with vLLM's own
flag names and defaults (vllm/engine/arg_utils.py, EngineArgs.add_cli_args: each config field
is --field-name, booleans also --no-field-name, underscores accepted for dashes)."""

import json

from servecap.ledger.errors import SpecError

from .engine import human_readable_int
from .launch_line import (
    BOOL,
    COUNT,
    FRACTION,
    TEXT,
    TORCH_DTYPES,
    WORDS,
    Dialect,
    LaunchLine,
    choice,
    count,
    module_rest,
    quantization,
    read,
    split,
)
from .spec import DEFAULT, Scenario

FIELD = "vllm serve"
# --flag -> (Scenario field, how the value is read); booleans read no value.
_INT, _FLOAT, _TEXT, _BIG, _BOOL = COUNT, FRACTION, TEXT, "human_readable_int", BOOL
MODELLED = {
    "--model": ("model.name", _TEXT), "--revision": ("model.revision", _TEXT),
    "--tensor-parallel-size": ("parallel.tensor_parallel_size", _INT),
    "--pipeline-parallel-size": ("parallel.pipeline_parallel_size", _INT),
    "--data-parallel-size": ("parallel.data_parallel_size", _INT),
    "--enable-expert-parallel": ("parallel.enable_expert_parallel", _BOOL),
    "--nnodes": ("parallel.nnodes", _INT),
    "--max-model-len": ("scheduler.max_model_len", _BIG),
    "--block-size": ("scheduler.block_size", _INT),
    "--max-num-seqs": ("scheduler.max_num_seqs", _INT),
    "--max-num-batched-tokens": ("scheduler.max_num_batched_tokens", _BIG),
    "--enable-prefix-caching": ("scheduler.enable_prefix_caching", _BOOL),
    "--enable-chunked-prefill": ("scheduler.enable_chunked_prefill", _BOOL),
    "--scheduling-policy": ("scheduler.scheduling_policy", _TEXT),
    "--gpu-memory-utilization": ("memory.gpu_memory_utilization", _FLOAT),
    "--kv-cache-memory-bytes": ("memory.kv_cache_memory_bytes", _TEXT),
    "--kv-cache-memory": ("memory.kv_cache_memory_bytes", _TEXT),
    "--num-gpu-blocks-override": ("memory.num_gpu_blocks_override", _INT),
    "--kv-cache-dtype": ("dtypes.kv_cache_dtype", "kv"),
    "--dtype": ("dtypes.dtype", "dtype"),
    "--quantization": ("dtypes.weight_dtype", "quant"),
    "--speculative-config": ("speculative", "json"),
    "--enable-lora": ("lora.enable_lora", _BOOL), "--max-loras": ("lora.max_loras", _INT),
    "--max-lora-rank": ("lora.max_lora_rank", _INT),
    "--max-cpu-loras": ("lora.max_cpu_loras", _INT),
    "--fully-sharded-loras": ("lora.fully_sharded_loras", _BOOL),
    "--lora-dtype": ("lora.lora_dtype", _TEXT),
    "--lora-target-modules": ("lora.lora_target_modules", WORDS),
    "--enable-eplb": ("parallel.enable_eplb", _BOOL),
    "--eplb-config": ("parallel", "eplb"),
    "--num-redundant-experts": ("parallel.num_redundant_experts", "zero"),
    "--eplb-window-size": ("parallel.eplb_window_size", _INT),
    "--enforce-eager": ("engine.enforce_eager", _BOOL),
    "--kv-offloading-size": ("memory.kv_offloading_size", "gib"),
    "--kv-offloading-backend": ("memory.kv_offloading_backend", _TEXT),
    "--limit-mm-per-prompt": ("multimodal.limit_mm_per_prompt", _TEXT),
    "--mm-processor-kwargs": ("multimodal.mm_processor_kwargs", _TEXT),
    "--mm-encoder-tp-mode": ("multimodal.mm_encoder_tp_mode", _TEXT),
    "--skip-mm-profiling": ("multimodal.skip_mm_profiling", _BOOL),
}
SHORT = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size",
         "-dp": "--data-parallel-size", "-q": "--quantization", "-n": "--nnodes",
         "-r": "--node-rank"}
# GPU memory is not changed by these (serving, tokenizer, logging, host-side settings).
IGNORED_VALUE = frozenset("""
--host --port --uds --api-key --served-model-name --tokenizer --tokenizer-mode
--tokenizer-revision --code-revision --download-dir --load-format --config-format --seed
--swap-space --max-logprobs --logprobs-mode --chat-template --chat-template-content-format
--response-role --tool-call-parser --tool-parser-plugin --reasoning-parser --uvicorn-log-level
--root-path --middleware --allowed-origins --allowed-methods --allowed-headers --ssl-keyfile
--ssl-certfile --ssl-ca-certs --ssl-cert-reqs --max-log-len --api-server-count
--distributed-executor-backend --worker-cls --worker-extension-cls --max-parallel-loading-workers
--otlp-traces-endpoint --collect-detailed-traces --generation-config --override-generation-config
--model-impl --data-parallel-rank --data-parallel-start-rank --data-parallel-size-local
--data-parallel-address --data-parallel-rpc-port --data-parallel-backend --all2all-backend
--long-prefill-token-threshold --max-num-partial-prefills --max-long-partial-prefills
--num-lookahead-slots --scheduler-cls --prefix-caching-hash-algo --log-config-file
--guided-decoding-backend --structured-outputs-config --kv-events-config --mm-processor-cache-gb
--safetensors-load-strategy --pt-load-map-location --ignore-patterns --allowed-local-media-path
--allowed-media-domains --hf-config-path --task --runner --convert --lora-modules
--show-hidden-metrics-for-version --logits-processor-pattern --logits-processors
--io-processor-plugin --tool-server --h11-max-incomplete-event-size --h11-max-header-count
--node-rank --master-addr --master-port
""".split())
IGNORED_BOOL = frozenset("""
--trust-remote-code --disable-log-stats --disable-log-requests --enable-log-requests
--enable-log-outputs --skip-tokenizer-init --enable-auto-tool-choice --enable-sleep-mode
--async-scheduling --calculate-kv-scales --disable-frontend-multiprocessing
--disable-fastapi-docs --enable-prompt-embeds --enable-request-id-headers
--enable-server-load-tracking --enable-force-include-usage --enable-tokenizer-info-endpoint
--disable-custom-all-reduce --data-parallel-hybrid-lb --headless --use-tqdm-on-load
--disable-chunked-mm-input --aggregate-engine-logging --return-tokens-as-token-ids
--enable-prompt-tokens-details --ray-workers-use-nsight --disable-uvicorn-access-log
--exclude-tools-when-tool-choice-none
""".split())
# These change what vLLM holds on the GPU in ways the ledger does not model.
REFUSED = {
    "--cpu-offload-gb": "moves weights to host memory",
    "--disable-sliding-window": "caches every layer's full context",
    "--specialize-active-lora": "captures CUDA graphs per count of active adapters",
    "--hf-overrides": "replaces config.json fields the ledger reads",
    "--rope-scaling": "replaces the context the model states",
    "--rope-theta": "replaces config.json's rope_theta",
    "--compilation-config": "changes the CUDA graphs captured", "-O": "changes the "
    "compilation level and graphs captured", "--cuda-graph-sizes": "changes the graphs "
    "captured", "--cudagraph-capture-sizes": "changes the graphs captured",
    "--max-cudagraph-capture-size": "changes the graphs captured",
    "--max-seq-len-to-capture": "changes the graphs captured",
    "--kv-transfer-config": "a KV connector holds GPU memory of its own",
    "--decode-context-parallel-size": "splits each request's KV across ranks",
    "-dcp": "splits each request's KV across ranks",
    "--mamba-cache-dtype": "changes a hybrid's state bytes",
    "--mamba-ssm-cache-dtype": "changes a hybrid's state bytes",
    "--mamba-block-size": "changes a hybrid's state blocks",
    "--override-attention-dtype": "changes the attention dtype",
    "--kv-sharing-fast-prefill": "changes KV sharing across layers",
    "--disable-hybrid-kv-cache-manager": "changes how hybrid layers share the pool",
    "--enable-dbo": "runs two micro-batches at once", "--config": "reads more flags from a "
    "file: paste them into the line instead", "--additional-config": "platform settings "
    "the ledger does not read",
}
_KV = {"auto": None, "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8",
       "bfloat16": "bf16", "float16": "fp16"}
# Quantization methods read from the checkpoint's own quantization_config (planned as such).
FROM_CHECKPOINT = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors",
                             "mxfp4", "modelopt", "modelopt_fp4", "fbgemm_fp8", "fp_quant",
                             "auto-round", "quark", "moe_wna16", "gptq_marlin_24", "marlin"})


def _tokens(value: str, where: str) -> int:
    """--max-model-len and --max-num-batched-tokens: vLLM's human_readable_int, >= 1 (the
    error names the flag as typed, not the Scenario field it sets)."""
    number = human_readable_int(value, where)
    if number < 1:
        raise SpecError(where, value, "must be a whole number >= 1 (tokens), or vLLM's 8k "
                        "(8,000) / 8K (8,192)")
    return number


VllmLine = LaunchLine  # the Scenario a line describes, the flags read, those ignored


def _entry(args: list[str]) -> list[str] | None:
    if args[:2] == ["vllm", "serve"]:
        return args[2:]
    return module_rest(args, "vllm.entrypoints")


def _speculative(value: str, field: str) -> dict[str, object]:
    """--speculative-config '{"model": "...", "num_speculative_tokens": 3}'."""
    try:
        config = json.loads(value)
    except (TypeError, json.JSONDecodeError):
        config = None
    if not isinstance(config, dict):
        raise SpecError(field, value, "a JSON object, e.g. '{\"model\": \"DRAFT\", "
                        "\"num_speculative_tokens\": 3}'")
    unknown = set(config) - {"model", "num_speculative_tokens", "method",
                             "disable_by_batch_size"}
    if unknown or config.get("method") not in (None, "draft_model"):
        raise SpecError(field, value, "a draft model (model, num_speculative_tokens, "
                        "disable_by_batch_size): other methods (eagle, mtp, ngram) are not "
                        "modelled")
    out = {"speculative.model": config.get("model")}
    if "num_speculative_tokens" in config:
        out["speculative.num_speculative_tokens"] = config["num_speculative_tokens"]
    if "disable_by_batch_size" in config:
        out["speculative.disable_by_batch_size"] = config["disable_by_batch_size"]
    return out


# --eplb-config's keys that change no device memory (when and how experts move)
EPLB_TIMING = frozenset({"step_interval", "log_balancedness", "log_balancedness_interval",
                         "use_async", "policy", "communicator", "enable_migration_batching"})


def _eplb(value: str, field: str) -> dict[str, object]:
    """--eplb-config '{"num_redundant_experts": 32, "window_size": 1000}' (vLLM's EPLBConfig)."""
    try:
        config = json.loads(value)
    except (TypeError, json.JSONDecodeError):
        config = None
    if not isinstance(config, dict):
        raise SpecError(field, value, "a JSON object, e.g. '{\"num_redundant_experts\": 32}'")
    unknown = set(config) - EPLB_TIMING - {"num_redundant_experts", "window_size"}
    if unknown:
        raise SpecError(field, value, f"{', '.join(sorted(unknown))}: not an EPLBConfig key "
                        "servecap reads (num_redundant_experts, window_size, and the timing "
                        "keys " + ", ".join(sorted(EPLB_TIMING)) + ")")
    out = {}
    if "num_redundant_experts" in config:
        out["parallel.num_redundant_experts"] = _zero(config["num_redundant_experts"], field)
    if "window_size" in config:
        out["parallel.eplb_window_size"] = count(config["window_size"], field)
    return out


def _zero(value, field: str) -> int:
    """A whole number >= 0, as vLLM's int() reads it (num_redundant_experts)."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if number < 0:
        raise SpecError(field, value, "a whole number >= 0")
    return number


def _gib(value, field: str) -> float:
    """A number of GiB > 0, as vLLM's float() reads --kv-offloading-size."""
    try:
        number = float(str(value).strip())
    except ValueError:
        number = -1.0
    if not number > 0 or number == float("inf"):
        raise SpecError(field, value, "a number of GiB > 0 (host memory over all tp x pp ranks)")
    return number


VLLM = Dialect(
    engine="vllm", name=FIELD, entry=_entry, modelled=MODELLED, aliases=SHORT,
    usage="vllm serve MODEL [flags] (or python -m vllm.entrypoints.openai.api_server "
    "--model MODEL ...)",
    ignored_value=IGNORED_VALUE, ignored_bool=IGNORED_BOOL,
    ignored_optional=frozenset({"--hf-token"}), refused=REFUSED,
    neutral={"--lora-extra-vocab-size": "256"},  # before v0.12; the ledger's rows are 256's
    readers={_BIG: lambda value, where, path: {path: _tokens(value, where)},
             "kv": lambda value, where, path: {path: choice(_KV, value, where)},
             "dtype": lambda value, where, path: {path: choice(TORCH_DTYPES, value, where)},
             "quant": lambda value, where, path: quantization(value, where, FROM_CHECKPOINT),
             "json": lambda value, where, path: _speculative(value, where),
             "eplb": lambda value, where, path: _eplb(value, where),
             "zero": lambda value, where, path: {path: _zero(value, where)},
             "gib": lambda value, where, path: {path: _gib(value, where)}},
    spelling=lambda flag: "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag,
    negatable=True)


def parse_vllm_line(argv: list[str] | str, base: Scenario = DEFAULT) -> LaunchLine:
    """`vllm serve MODEL --flag value ...` (or `python -m vllm.entrypoints.openai.api_server
    --model MODEL ...`) as a Scenario of engine vllm."""
    args = split(argv)
    rest = _entry(args)
    if rest is None:
        raise SpecError(FIELD, " ".join(args[:3]), "a vLLM launch line: " + VLLM.usage)
    return read(VLLM, rest, base)
