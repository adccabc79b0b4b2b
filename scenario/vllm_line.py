"""A pasted `vllm serve MODEL [flags]` line as a Scenario, read with vLLM's own flag names and
defaults (vllm/engine/arg_utils.py, EngineArgs.add_cli_args: each config field is
--field-name, booleans also --no-field-name, underscores accepted for dashes). A flag servecap
models sets its field; one that does not change GPU memory is listed as ignored; one that
changes memory in a way servecap does not model is refused by name, as is a flag it does not
know."""

import json
import shlex
from dataclasses import dataclass

from servecap.ledger.errors import SpecError

from .engine import human_readable_int
from .spec import DEFAULT, Scenario, with_values

FIELD = "vllm serve"
# --flag -> (Scenario field, how the value is read); booleans read no value.
_INT, _FLOAT, _TEXT, _BIG, _BOOL = "int", "float", "text", "human_readable_int", "bool"
MODELLED = {
    "--model": ("model.name", _TEXT), "--revision": ("model.revision", _TEXT),
    "--tensor-parallel-size": ("parallel.tensor_parallel_size", _INT),
    "--pipeline-parallel-size": ("parallel.pipeline_parallel_size", _INT),
    "--data-parallel-size": ("parallel.data_parallel_size", _INT),
    "--enable-expert-parallel": ("parallel.enable_expert_parallel", _BOOL),
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
    "--dtype": ("dtypes.activation_dtype", "dtype"),
    "--quantization": ("dtypes.weight_dtype", "quant"),
    "--speculative-config": ("speculative", "json"),
}
SHORT = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size",
         "-dp": "--data-parallel-size", "-q": "--quantization"}
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
    "--enforce-eager": "skips CUDA graph capture and torch.compile (a different profile)",
    "--disable-sliding-window": "caches every layer's full context",
    "--enable-lora": "holds LoRA adapters beside the weights",
    "--max-loras": "sizes the LoRA adapter slots", "--max-lora-rank": "sizes LoRA slots",
    "--max-cpu-loras": "sizes LoRA slots", "--fully-sharded-loras": "shards LoRA slots",
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
    "--enable-eplb": "holds redundant experts", "--num-redundant-experts": "holds "
    "redundant experts", "--eplb-config": "holds redundant experts",
    "--mamba-cache-dtype": "changes a hybrid's state bytes",
    "--mamba-ssm-cache-dtype": "changes a hybrid's state bytes",
    "--mamba-block-size": "changes a hybrid's state blocks",
    "--limit-mm-per-prompt": "sizes the multimodal encoder's profile",
    "--skip-mm-profiling": "skips the multimodal encoder's profile",
    "--override-attention-dtype": "changes the attention dtype",
    "--kv-sharing-fast-prefill": "changes KV sharing across layers",
    "--disable-hybrid-kv-cache-manager": "changes how hybrid layers share the pool",
    "--enable-dbo": "runs two micro-batches at once", "--config": "reads more flags from a "
    "file: paste them into the line instead", "--additional-config": "platform settings "
    "the ledger does not read",
}
_KV = {"auto": None, "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8",
       "bfloat16": "bf16", "float16": "fp16"}
_DTYPE = {"auto": None, "half": "fp16", "float16": "fp16", "bfloat16": "bf16",
          "float": "fp32", "float32": "fp32"}
# Quantization methods read from the checkpoint's own quantization_config (planned as such).
FROM_CHECKPOINT = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors",
                             "mxfp4", "modelopt", "modelopt_fp4", "fbgemm_fp8", "fp_quant",
                             "auto-round", "quark", "moe_wna16", "gptq_marlin_24", "marlin"})


@dataclass(frozen=True)
class VllmLine:
    """The Scenario a line describes, the flags read, and those listed as ignored."""

    scenario: Scenario
    modelled: tuple[str, ...]
    ignored: tuple[str, ...]


def parse_vllm_line(argv: list[str] | str, base: Scenario = DEFAULT) -> VllmLine:
    """`vllm serve MODEL --flag value ...` (or `python -m vllm.entrypoints.openai.api_server
    --model MODEL ...`) as a Scenario of engine vllm."""
    args = shlex.split(argv) if isinstance(argv, str) else list(argv)
    rest = _after_entrypoint(args)
    values: dict[str, object] = {"engine.name": "vllm"}
    modelled, ignored = [], []
    if rest and not rest[0].startswith("-"):
        values["model.name"] = rest.pop(0)
    while rest:
        flag, value, rest = _next(rest)
        if _bare(flag) in MODELLED and MODELLED[_bare(flag)][1] == _BOOL:
            values[MODELLED[_bare(flag)][0]] = not flag.startswith("--no-")
            modelled.append(flag)
        elif flag in MODELLED:
            path, kind = MODELLED[flag]
            value, rest = _value(flag, value, rest, False)
            values.update(_read(flag, path, kind, value))
            modelled.append(flag)
        elif _bare(flag) in IGNORED_BOOL:
            ignored.append(flag)
        elif flag in IGNORED_VALUE or flag == "--hf-token":
            value, rest = _value(flag, value, rest, flag == "--hf-token" and _no_value(rest))
            ignored.append(flag)
        elif _bare(flag) in REFUSED:
            raise SpecError(f"{FIELD} {flag}", value, f"not modelled: it {REFUSED[_bare(flag)]}; "
                            "remove it to plan without it")
        else:
            raise SpecError(f"{FIELD} {flag}", value, "not a vLLM flag servecap knows as "
                            "modelled or ignored; remove it to plan without it")
    if values.get("model.name") is None and base.model.name is None:
        raise SpecError(f"{FIELD} MODEL", None, "the line names no model (vllm serve MODEL)")
    return VllmLine(with_values(base, values), tuple(modelled), tuple(ignored))


def _after_entrypoint(args: list[str]) -> list[str]:
    if args[:2] == ["vllm", "serve"]:
        return args[2:]
    for i, arg in enumerate(args[:3]):
        if arg == "-m" and i + 1 < len(args) and args[i + 1].startswith("vllm.entrypoints"):
            return args[i + 2:]
    raise SpecError(FIELD, " ".join(args[:3]), "a vLLM launch line: vllm serve MODEL [flags] "
                    "(or python -m vllm.entrypoints.openai.api_server --model MODEL ...)")


def _next(rest: list[str]) -> tuple[str, str | None, list[str]]:
    """One flag, vLLM-spelled: --max_model_len is --max-model-len, --flag=value splits."""
    token, rest = rest[0], rest[1:]
    if not token.startswith("-"):
        raise SpecError(FIELD, token, "a --flag: only the model comes before the flags")
    flag, _, value = token.partition("=")
    if flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-")
    flag = SHORT.get(flag, flag)
    return flag, (value if "=" in token else None), rest


def _bare(flag: str) -> str:
    """--no-enable-prefix-caching is the same knob as --enable-prefix-caching."""
    return "--" + flag[5:] if flag.startswith("--no-") else flag


def _no_value(rest: list[str]) -> bool:
    return not rest or rest[0].startswith("-")


def _value(flag, value, rest, is_bool):
    if is_bool or value is not None:
        return value, rest
    if _no_value(rest):
        raise SpecError(f"{FIELD} {flag}", None, "needs a value")
    return rest[0], rest[1:]


def _read(flag: str, path: str, kind: str, value) -> dict[str, object]:
    field = f"{FIELD} {flag}"
    try:
        if kind == _INT:
            return {path: int(value)}
        if kind == _FLOAT:
            return {path: float(value)}
        if kind == _BIG:
            return {path: human_readable_int(value, field)}
    except ValueError:
        raise SpecError(field, value, "a number") from None
    if kind == "kv":
        return {path: _choice(_KV, value, field)}
    if kind == "dtype":
        return {path: _choice(_DTYPE, value, field)}
    if kind == "quant":
        return _quantization(value, field)
    if kind == "json":
        return _speculative(value, field)
    return {path: value}


def _choice(table: dict, value, field: str):
    key = str(value).strip().lower()
    if key not in table:
        raise SpecError(field, value, "allowed: " + ", ".join(table))
    return table[key]


def _quantization(value: str, field: str) -> dict[str, object]:
    """fp8 quantizes the weights online; a checkpoint format is read from the checkpoint."""
    method = str(value).strip().lower()
    if method == "fp8":
        return {"dtypes.weight_dtype": "fp8"}
    if method in FROM_CHECKPOINT or method == "none":
        return {}
    raise SpecError(field, value, "fp8 (online), or a checkpoint's own format (" +
                    ", ".join(sorted(FROM_CHECKPOINT)) + "); other methods are not modelled")


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
