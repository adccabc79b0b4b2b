"""SGLang's table for a pasted launch line (scenario/launch_line.py reads it):
`python -m sglang.launch_server --model-path MODEL [flags]` or `sglang serve MODEL [flags]`,
with SGLang's own flag names and defaults. Read from sgl-project/sglang: the ServerArgs fields
in python/sglang/srt/arg_groups/fields/ (model.py, parallel.py, schedule.py, memory.py,
spec.py, serving.py, observability.py, exec_.py; schedule.py at commit
001b88623b1def14a6970a26626d17c7ee874e91), registered by python/sglang/srt/server_args.py
(argparse: --field-name and the aliases each field names; a switch is store_true, with no
--no- form; dashes only) and python/sglang/cli/serve.py (`sglang serve MODEL` puts the model
first), as released in sglang 0.5.23. A flag not given takes SGLang's default, which the ledger
holds where servecap models it (ledger/engines.py: mem_fraction_static by tp x pp, page size
1; the model's context length)."""

import re

from servecap.ledger.errors import SpecError

from .launch_line import (
    COUNT,
    FRACTION,
    OFF,
    TEXT,
    TORCH_DTYPES,
    Dialect,
    choice,
    expert_parallel,
    module_rest,
    quantization,
)

NAME = "sglang"
MODELLED = {
    "--model-path": ("model.name", TEXT), "--revision": ("model.revision", TEXT),
    "--tp-size": ("parallel.tensor_parallel_size", COUNT),
    "--pp-size": ("parallel.pipeline_parallel_size", COUNT),
    "--dp-size": ("parallel.data_parallel_size", COUNT),
    # nodes the tp group spans: across nodes no custom all-reduce (as vLLM's --nnodes)
    "--nnodes": ("parallel.nnodes", COUNT),
    "--ep-size": ("_ep_size", COUNT),
    "--mem-fraction-static": ("memory.mem_fraction_static", FRACTION),
    "--max-total-tokens": ("memory.max_total_tokens", COUNT),
    "--context-length": ("scheduler.max_model_len", "int"),
    "--page-size": ("scheduler.block_size", COUNT),
    "--max-running-requests": ("scheduler.max_num_seqs", COUNT),
    "--chunked-prefill-size": ("scheduler.max_num_batched_tokens", "chunk"),
    "--max-prefill-tokens": ("_max_prefill_tokens", "int"),
    "--disable-radix-cache": ("scheduler.enable_prefix_caching", OFF),
    "--kv-cache-dtype": ("dtypes.kv_cache_dtype", "kv"),
    # the model dtype, as vLLM's: 'Data type for model weights and activations', and
    # --kv-cache-dtype auto 'will use model data type'
    # (python/sglang/srt/arg_groups/fields/model.py@6074b7d Model.dtype, .kv_cache_dtype)
    "--dtype": ("dtypes.dtype", "dtype"),
    "--quantization": ("dtypes.weight_dtype", "quant"),
    "--model-type": ("model.name", "model_type"),
}
# Other spellings SGLang accepts for the same field (its aliases, and argparse's unique
# prefixes --tp and --dp).
ALIASES = {"--model": "--model-path", "--tensor-parallel-size": "--tp-size", "--tp": "--tp-size",
           "--pipeline-parallel-size": "--pp-size", "--data-parallel-size": "--dp-size",
           "--dp": "--dp-size", "--expert-parallel-size": "--ep-size", "--ep": "--ep-size",
           "--decode-context-parallel-size": "--dcp-size",
           "--attention-data-parallel-size": "--attn-dp-size",
           "--moe-data-parallel-size": "--moe-dp-size",
           "--speculative-draft-model": "--speculative-draft-model-path",
           "--enable-hicache": "--enable-hierarchical-cache"}
# GPU memory is not changed by these (serving, tokenizer, logging, scheduling order, host).
IGNORED_VALUE = frozenset("""
--host --port --served-model-name --tokenizer-path --tokenizer-mode --tokenizer-backend
--tokenizer-worker-num --detokenizer-worker-num --api-key --admin-api-key --chat-template
--completion-template --hf-chat-template-name --tool-call-parser --reasoning-parser
--tool-server --log-level --log-level-http --log-requests-level --log-requests-format
--log-requests-target --random-seed --schedule-policy --schedule-conservativeness
--stream-interval --download-dir --load-format --dist-init-addr --node-rank
--nccl-port --dist-timeout --max-queued-requests --max-inflight-prefill-tokens
--file-storage-path --base-gpu-id --gpu-id-step --device --watchdog-timeout
--soft-watchdog-timeout --load-balance-method --sampling-backend --grammar-backend
--attention-backend --prefill-attention-backend --decode-attention-backend --ssl-keyfile
--ssl-certfile --ssl-ca-certs --ssl-keyfile-password --fastapi-root-path --decode-log-interval
--otlp-traces-endpoint --otlp-service-name --crash-dump-folder --weight-version
--radix-eviction-policy --retraction-policy --num-continuous-decode-steps
--scheduler-recv-interval --default-priority-value --priority-scheduling-preemption-threshold
--prefill-max-requests --prefill-decode-interval --model-impl --gc-warning-threshold-secs
--sampling-defaults --preferred-sampling-params --grpc-port --uvicorn-access-log-exclude-prefixes
--tokenizer-metrics-custom-labels-header --constrained-json-whitespace-pattern
""".split())
IGNORED_BOOL = frozenset("""
--trust-remote-code --skip-server-warmup --enable-metrics --log-requests --show-time-cost
--enable-cache-report --skip-tokenizer-init --enable-p2p-check --disable-overlap-schedule
--enable-mixed-chunk --enable-priority-scheduling --disable-priority-preemption
--abort-on-priority-when-disabled --schedule-low-priority-values-first --allow-auto-truncate
--enable-http2 --enable-trace --enable-request-time-stats-logging
--enable-metrics-for-all-schedulers --disable-outlines-disk-cache --disable-custom-all-reduce
--enable-tokenizer-batch-encode --disable-tokenizer-batch-decode --enable-tf32-matmul
--return-input-ids --return-output-ids --stream-response-default-include-usage
""".split())
# Accepted at SGLang's default only (then nothing changes); any other value is refused.
NEUTRAL = {"--attn-dp-size": "1", "--dcp-size": "1", "--moe-dp-size": "1",
           "--attn-cp-size": "1", "--cpu-offload-gb": "0"}
# These change what SGLang holds on the GPU in ways the ledger does not model.
REFUSED = {
    "--enable-dp-attention": "keeps a KV pool per attention data-parallel rank",
    "--enable-lora": "holds LoRA adapters beside the weights",
    "--lora-paths": "holds LoRA adapters beside the weights",
    "--enable-hierarchical-cache": "adds a host KV tier and its transfer buffers",
    "--enable-lmcache": "adds an external KV tier", "--enable-flexkv": "adds a KV offload tier",
    "--disable-cuda-graph": "skips CUDA graph capture (a different profile)",
    "--enable-torch-compile": "changes the graphs captured",
    "--torch-compile-max-bs": "changes the graphs captured",
    "--json-model-override-args": "replaces config.json fields the ledger reads",
    "--disaggregation-mode": "a prefill or decode role holds KV transfer buffers",
    "--enable-eplb": "holds redundant experts",
    "--ep-num-redundant-experts": "holds redundant experts",
    "--moe-a2a-backend": "holds all-to-all buffers (DeepEP and others)",
    "--enable-two-batch-overlap": "runs two micro-batches at once",
    "--enable-memory-saver": "releases and re-creates the pools",
    "--enable-unified-memory": "shares one buffer between a hybrid's pools",
    "--swa-full-tokens-ratio": "splits the pool between sliding-window and full layers",
    "--disable-hybrid-swa-memory": "changes how sliding-window layers share the pool",
    "--max-mamba-cache-size": "sizes a hybrid's state pool",
    "--mamba-full-memory-ratio": "sizes a hybrid's state pool",
    "--mamba-ssm-dtype": "changes a hybrid's state bytes",
    "--is-embedding": "an embedding model keeps no decode KV",
    "--enable-multimodal": "profiles the multimodal encoder",
    "--enable-prefill-cp": "splits each request's KV across ranks",
    "--quantization-param-path": "reads KV scales from a file",
    "--modelopt-quant": "quantizes the weights at load",
    "--enable-dp-lm-head": "changes the LM head's split",
    "--config": "reads more flags from a file: paste them into the line instead",
}
REFUSED_PREFIXES = (
    ("--speculative-", "adds a draft model's weights and KV (plan does not model it)"),
    ("--lora-", "sizes LoRA adapter slots"), ("--max-lora", "sizes LoRA adapter slots"),
    ("--max-loaded-loras", "sizes LoRA adapter slots"),
    ("--hicache-", "sizes a host KV tier"), ("--cuda-graph-", "changes the graphs captured"),
    ("--deepep-", "holds DeepEP buffers"), ("--eplb-", "holds redundant experts"),
    ("--offload-", "moves weights to host memory"), ("--mamba-", "changes a hybrid's state"),
    ("--disaggregation-", "a prefill or decode role holds KV transfer buffers"),
)
# --kv-cache-dtype's choices: auto keeps the model dtype; fp8 spellings are 1 byte.
_KV = {"auto": None, "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bf16": "bf16", "bfloat16": "bf16"}
_KV_NOTE = " (mxfp8, nvfp4 and fp4_mx_block16 are not modelled)"
# --quantization methods read from the checkpoint's own quantization_config.
FROM_CHECKPOINT = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin", "marlin",
                             "compressed-tensors", "modelopt", "modelopt_fp8", "modelopt_fp4",
                             "mxfp4", "moe_wna16", "auto-round", "quark", "w8a8_int8",
                             "w8a8_fp8"})
_SUFFIX = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def sglang_int(value: str, where: str) -> int:
    """SGLang's human_readable_int (python/sglang/srt/utils/common.py): SI suffixes k, M, G,
    T (decimals allowed) and IEC Ki, Mi, Gi, Ti, case-sensitive: 8k = 8,000, 8Ki = 8,192."""
    text = str(value).strip()
    match = _SUFFIX.fullmatch(text)
    if match and (match.group(2) in _SI or "." not in match.group(1)):
        number, suffix = match.groups()
        return int(float(number) * _SI[suffix]) if suffix in _SI else \
            int(number) * _IEC[suffix]
    if text.isascii() and text.isdigit() and int(text) >= 1:
        return int(text)
    raise SpecError(where, value, "a whole number >= 1, or SGLang's 8k (8,000) / 8Ki (8,192)")


def _chunk(value: str, where: str, path: str) -> dict:
    """--chunked-prefill-size N: prefill in chunks of N tokens (the batch servecap sizes
    activations by); -1 turns chunked prefill off."""
    if str(value).strip() == "-1":
        return {"scheduler.enable_chunked_prefill": False}
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise SpecError(where, value, "a whole number >= 1 (tokens per chunk), or -1 (off)")
    return {path: size, "scheduler.enable_chunked_prefill": True}


def _model_type(value: str, where: str, path: str) -> dict:
    """`sglang serve --model-type`: auto or llm serve a language model."""
    if value not in ("auto", "llm"):
        raise SpecError(where, value, "auto or llm (servecap plans language models)")
    return {}


def _finish(values: dict, name: str) -> dict:
    """--ep-size against --tp-size; without chunked prefill a prefill batch holds up to
    --max-prefill-tokens (SGLang's default 16,384) tokens."""
    values = expert_parallel(values, f"{name} --ep-size", "--tp-size")
    prefill = values.pop("_max_prefill_tokens", None)
    if values.get("scheduler.enable_chunked_prefill") is False:
        values["scheduler.max_num_batched_tokens"] = prefill or 16384
    return values


def _entry(args: list[str]) -> list[str] | None:
    if args[:2] == ["sglang", "serve"]:
        return args[2:]
    return module_rest(args, "sglang.launch_server")


SGLANG = Dialect(
    engine="sglang", name=NAME, entry=_entry, modelled=MODELLED, aliases=ALIASES,
    usage="python -m sglang.launch_server --model-path MODEL [flags] (or sglang serve MODEL "
    "...)",
    ignored_value=IGNORED_VALUE, ignored_bool=IGNORED_BOOL, neutral=NEUTRAL, refused=REFUSED,
    refused_prefixes=REFUSED_PREFIXES,
    readers={"int": lambda value, where, path: {path: sglang_int(value, where)},
             "chunk": _chunk, "model_type": _model_type,
             "kv": lambda value, where, path: {path: choice(_KV, value, where, _KV_NOTE)},
             "dtype": lambda value, where, path: {path: choice(TORCH_DTYPES, value, where)},
             "quant": lambda value, where, path: quantization(value, where, FROM_CHECKPOINT)},
    finish=_finish)
