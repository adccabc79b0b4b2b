"""Read what an SGLang or TensorRT-LLM startup log says about memory: the free memory the engine
measured, the weights, the KV pool it allocated (tokens and GiB), its fraction and the flags it
states, line by line. SGLang prints GiB as 'GB' (it divides by 1 << 30)."""

import re
from dataclasses import dataclass

from .errors import SpecError
from .vllm_log import LineRead

SGLANG, TRTLLM = "sglang", "trtllm"
_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
_INT = r"([0-9][0-9,]*)"
_UNIT = r" (B|KB|MB|GB|TB)"
# cpp/tensorrt_llm/runtime/memoryCounters.cpp doubleBytesToString: divides by 1024 per unit,
# so its 'GB' is GiB; a field with a unit group is converted to GiB
_UNITS = {"B": 2**-30, "KB": 2**-20, "MB": 2**-10, "GB": 1.0, "TB": 1024.0}
# field -> patterns per engine; the earliest match in the log wins (the first startup, TP0 first)
PATTERNS: dict[str, dict[str, tuple[str, ...]]] = {
    SGLANG: {  # python/sglang/srt/model_executor/model_runner.py, mem_cache/memory_pool.py
        "free_at_start_gib": (r"Load weight begin\. avail mem=" + _NUM + r" GB",),
        "weights_gib": (r"Load weight end\..*?mem usage=" + _NUM + r" GB",),
        "after_weights_gib": (r"Load weight end\..*?avail mem=" + _NUM + r" GB",),
        "kv_tokens": (r"KV Cache is allocated\. #tokens: " + _INT, r"max_total_num_tokens=" + _INT),
        "k_gib": (r"K size: " + _NUM + r" GB",),
        "v_gib": (r"V size: " + _NUM + r" GB",),
        "fraction": (r"mem_fraction_static=" + _NUM, r"--mem-fraction-static[ =]" + _NUM),
        "tensor_parallel_size": (r"\btp_size=" + _INT, r"--(?:tp|tp-size|tensor-parallel-size)[ =]"
                                 + _INT),
        "context_len": (r"context_len=" + _INT, r"context_length=" + _INT,
                        r"--context-length[ =]" + _INT),
        "tokens_per_block": (r"\bpage_size=" + _INT, r"--page-size[ =]" + _INT),
        "max_total_tokens": (r"\bmax_total_tokens=" + _INT, r"--max-total-tokens[ =]" + _INT),
        "nnodes": (r"\bnnodes=" + _INT, r"--nnodes[ =]" + _INT),
    },
    TRTLLM: {  # tensorrt_llm/_torch/pyexecutor/_util.py, cpp/.../kvCacheManager.cpp
        "total_gib": (r"device total memory " + _NUM + r" GiB",
                      r"calculating max tokens in paged kv cache: total: " + _NUM + r" GiB"),
        "free_at_start_gib": (r"calculating max tokens in paged kv cache: total: [0-9.]+ GiB, "
                              r"available: " + _NUM + r" GiB",),
        "peak_gib": (r"Peak memory during memory usage profiling \(torch \+ non-torch\): " + _NUM
                     + r" GiB",),
        # KvCacheCreator.configure_kv_cache_capacity's budget, printed once more, after its
        # max_tokens / max_gpu_total_bytes caps, as 'Estimated max memory in KV cache' (the
        # line a log that elides the profile still shows; the same 5.95 GiB on the GB10 log)
        "available_kv_gib": (r"available KV cache memory when calculating max tokens: " + _NUM
                             + r" GiB", r"Estimated max memory in KV cache ?: " + _NUM
                             + r" GiB"),
        "weights_gib": (r"Memory used after loading model weights \(inside torch\) in memory "
                        r"usage profiling: " + _NUM + r" GiB",),
        "kv_pool_gib": (r"Allocated " + _NUM + r" GiB for max tokens in paged KV cache",),
        "kv_tokens": (r"for max tokens in paged KV cache \(" + _INT + r"\)",
                      r"Using " + _INT + r" tokens in paged KV cache"),
        "fraction": (r"fraction is set " + _NUM, r"free_gpu_memory_fraction['\"]?[=:] ?" + _NUM,
                     r"free_gpu_memory_fraction and max_tokens are set \(to " + _NUM,
                     r"--kv_cache_free_gpu_mem(?:ory)?_fraction[ =]" + _NUM,
                     r"(?i:kv_cache_free_gpu_mem_fraction)[:=] ?" + _NUM),
        "tensor_parallel_size": (r"tensor_parallel_size['\"]?[=:] ?" + _INT,
                                 r"--tp_size[ =]" + _INT),
        "context_len": (r"max_seq_len['\"]?[=:] ?" + _INT, r"--max_seq_len[ =]" + _INT),
        "tokens_per_block": (r"tokens per block[=:] ?" + _INT,
                             r"Number of tokens per block: " + _INT),
        "engine_mib": (r"Loaded engine size: " + _INT + r" MiB",),
        "max_tokens": (r"max_tokens are set \(to [0-9.]+ and " + _INT,
                       r"max_tokens['\"]?[=:] ?" + _INT),
        # the C++ flow's allocations before the KV cache (trtGptModelInflightBatching.cpp),
        # printed by MemoryCounters::bytesToString in 1024-based B/KB/MB/GB (_UNITS)
        "context_mib": (r"Allocated " + _NUM + r" MiB for execution context memory",),
        "runtime_buffers_gib": (r"Allocated " + _NUM + _UNIT
                                + r" GPU memory for runtime buffers",),
        "decoder_gib": (r"Allocated " + _NUM + _UNIT + r" GPU memory for decoder",),
        # the PyTorch flow's profile (_util.py): outside torch, and the estimation pass's cache
        "outside_torch_gib": (r"Memory used outside torch \(e\.g\., NCCL and CUDA graphs\) in "
                              r"memory usage profiling: " + _NUM + r" GiB",),
        "tmp_kv_gib": (r"tmp kv_mem " + _NUM + r" GiB",
                       r"temporary kv cache memory during profiling " + _NUM + r" GiB"),
    },
}
TEXT = {SGLANG: {"model": (r"model_path='([^']+)'", r"--model-path (\S+)"),
                 "kv_cache_dtype": (r"Using KV cache dtype: torch\.(\w+)",
                                    r"kv_cache_dtype='(\w+)'")},
        TRTLLM: {"model": (r"--model-path (\S+)", r"trtllm-serve (?:serve )?(?!for )(\S+)"),
                 "kv_cache_dtype": (r"kv_cache_dtype['\"]?[=:] ?['\"]?(\w+)",)}}
INTEGERS = {"kv_tokens", "tensor_parallel_size", "context_len", "tokens_per_block", "engine_mib",
            "max_tokens", "max_total_tokens", "nnodes"}
MEMORY = re.compile(r"GiB|\bGB\b|MiB|KV [Cc]ache|kv cache|memory|mem usage|avail mem|tokens",
                    re.IGNORECASE)


@dataclass(frozen=True)
class EngineLogFacts:
    """The figures one SGLang or TensorRT-LLM startup printed (None where it printed none), in
    GiB as printed. SGLang: free_at_start is 'Load weight begin. avail mem' (the free memory its
    budget takes mem_fraction_static of), after_weights the free memory after loading; the pool
    is K + V. TensorRT-LLM: the pool is 'Allocated X GiB for max tokens in paged KV cache (N)',
    available_kv the PyTorch flow's fraction x (total - peak + the estimation pass's cache),
    free_at_start the C++ flow's 'available' before the fraction; engine_mib, context_mib,
    runtime_buffers and decoder what the C++ flow allocates before its KV cache (the engine,
    TensorRT's execution context, the runtime buffers and the decoder)."""

    engine: str
    free_at_start_gib: float | None = None
    weights_gib: float | None = None
    after_weights_gib: float | None = None
    total_gib: float | None = None
    peak_gib: float | None = None
    available_kv_gib: float | None = None
    kv_tokens: int | None = None
    kv_pool_gib: float | None = None
    k_gib: float | None = None
    v_gib: float | None = None
    fraction: float | None = None
    tensor_parallel_size: int | None = None
    context_len: int | None = None
    tokens_per_block: int | None = None
    engine_mib: int | None = None
    context_mib: float | None = None
    runtime_buffers_gib: float | None = None
    decoder_gib: float | None = None
    outside_torch_gib: float | None = None
    tmp_kv_gib: float | None = None
    max_tokens: int | None = None
    max_total_tokens: int | None = None
    nnodes: int | None = None
    model: str | None = None
    kv_cache_dtype: str | None = None
    lines: tuple[LineRead, ...] = ()

    @property
    def pool_gib(self) -> float | None:
        if self.kv_pool_gib is not None:
            return self.kv_pool_gib
        if self.k_gib is not None and self.v_gib is not None:
            return round(self.k_gib + self.v_gib, 4)
        return None


def parse_engine_log(text: str, engine: str, source: str = "log") -> EngineLogFacts:
    """The first occurrence of each figure (TensorRT-LLM's pool and tokens: the first after its
    profile line, FINAL_PASS); fails when no pool or token line is found."""
    if engine not in PATTERNS:
        raise SpecError("--engine", engine, f"{SGLANG} or {TRTLLM} (vLLM logs: --engine vllm)")
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1)
                if not line.lstrip().startswith("#")]
    body = "\n".join(line for _, line in numbered)
    found = {name: _value(name, body, patterns) for name, patterns in PATTERNS[engine].items()}
    final = _final_pass(body) if engine == TRTLLM else None
    if final is not None:
        found |= {name: value for name in FINAL_PASS
                  if (value := _value(name, final, PATTERNS[engine][name])) is not None}
        found["max_tokens"] = None  # the estimation's cap, then the profile's own result
    texts = {name: _first(body, patterns) for name, patterns in TEXT[engine].items()}
    facts = EngineLogFacts(engine, lines=tuple(_read(numbered, engine)),
                           **{k: v for k, v in {**found, **texts}.items() if v is not None})
    if facts.kv_tokens is None and facts.pool_gib is None:
        raise SpecError("log", source, f"none of {engine}'s KV cache lines found (" + (
            "'KV Cache is allocated. #tokens', 'max_total_num_tokens='" if engine == SGLANG
            else "'Allocated ... for max tokens in paged KV cache'") + "): another engine's log? "
            "vLLM's is read with --engine vllm")
    return facts


# TensorRT-LLM's PyTorch flow allocates the cache twice: KvCacheCreator.try_prepare_estimation
# caps kv_cache_config.max_tokens at a small estimation size, the executor runs its profile on
# that cache, then configure_kv_cache_capacity logs the profile ('Peak memory during memory
# usage profiling ...'), sets max_tokens from it and the cache is built again
# (tensorrt_llm/_torch/pyexecutor/_util.py, py_executor_creator.py). The pool and its tokens
# are the ones after the profile line; those before it are the estimation's. Neither pass's
# 'Both free_gpu_memory_fraction and max_tokens are set' figure is a setting of the user's
# (the first is the estimation size, the second the memory rule's own result, which the plan
# is checked against), so such a log gives no max_tokens: a user's cap is passed as a flag.
FINAL_PASS = ("kv_pool_gib", "kv_tokens")
PROFILE_LINE = re.compile(r"Peak memory during memory usage profiling")


def _final_pass(body: str) -> str | None:
    """The log after TensorRT-LLM's profile line, None where it prints none."""
    match = PROFILE_LINE.search(body)
    return body[match.end():] if match else None


def _value(name: str, body: str, patterns: tuple[str, ...]) -> int | float | None:
    match = _match(body, patterns)
    if match is None:
        return None
    digits = match.group(1).replace(",", "")
    if len(digits) > 30:
        raise SpecError(name, digits, "a figure of that many digits is not an engine's value")
    if name in INTEGERS:
        return int(digits)
    unit = match.group(2) if match.lastindex and match.lastindex >= 2 else None
    return float(digits) * _UNITS[unit] if unit else float(digits)


def _match(text: str, patterns: tuple[str, ...]) -> re.Match | None:
    hits = [m for p in patterns if (m := re.search(p, text))]
    return min(hits, key=lambda m: m.start()) if hits else None


def _first(text: str, patterns: tuple[str, ...]) -> str | None:
    match = _match(text, patterns)
    return match.group(1) if match else None


def _read(numbered: list[tuple[int, str]], engine: str):
    """Each line that gave a figure, with the fields; each other memory line with ''."""
    for number, line in numbered:
        names = [name for name, patterns in PATTERNS[engine].items()
                 if any(re.search(p, line) for p in patterns)]
        if names or MEMORY.search(line):
            yield LineRead(number, line.strip()[:400], ", ".join(names))
