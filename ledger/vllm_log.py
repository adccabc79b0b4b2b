"""Read what a vLLM startup log says about memory (V0 and V1 formats), line by line: each
figure, the start's failure, per-rank pools, the release, the flags and KV connectors."""

import re
from dataclasses import dataclass, field, fields

from .errors import SpecError
from .units import GiB
from .vllm_log_args import allreduce_off, args_read, logged_args, logged_env
from .vllm_release import LoggedRelease, release_of
from .vllm_versions import FLASHINFER, TORCH, TRITON

_NUM = r"(-?[0-9][0-9,]*(?:\.[0-9]+)?)"
_INT = r"([0-9][0-9,]*)"
# field -> patterns, in the wordings vLLM has printed since 0.6 (see each pattern's comment)
# The lines a start loads its weights with, once per start and rank; the profile's summary
# ('model weights take', V0 0.6.5-0.7) restates the figure later in the same start
WEIGHTS_LOADED = (
    r"Loading model weights took " + _NUM + r" GB",  # V0 model_runner (value is GiB)
    r"Model loading took " + _NUM + r" Gi?B",  # V0 >= 0.6.5 and V1
)
# The API server resolves the model's architecture and then its scheduler config again (0.11
# on): a 'Chunked prefill is enabled with max_num_batched_tokens=2048' printed before this line
# is a default the resolved config replaces (faradawn/bench3 logs/vllm_server.log @ 446e08ca,
# 0.11.2 on an H200: 2048, then 8192 after 'Resolved architecture: LlamaForCausalLM')
RESOLVED = "Resolved architecture:"
# --num-gpu-blocks-override N: 'Overriding num_gpu_blocks=8967 with num_gpu_blocks_override=
# 1024' (vllm/v1/core/kv_cache_utils.py) before the pool's lines, which then print N. 0.19's
# profile prints one with num_gpu_blocks=0 for its own dummy cache (the override then its
# max_cudagraph_capture_size: 512, or 1,024 on the gpt-oss logs), whatever the flags: the
# user's line carries the override the log's args set and a profiled count above 0
OVERRIDE = r"Overriding num_gpu_blocks=([0-9]+) with num_gpu_blocks_override={}\b"
PATTERNS: dict[str, tuple[str, ...]] = {
    "weights_gib": WEIGHTS_LOADED + (
        r"model weights take\s+" + _NUM + r"\s*GiB",  # V0 profiling summary / table
    ),
    "total_gpu_gib": (r"total_gpu_memory[=\s(]+" + _NUM + r"\s*GiB",
                      r"memory snapshot: .*?total_memory=" + _NUM + r"GiB"),  # V1 DEBUG
    "gpu_memory_utilization": (r"gpu_memory_utilization[=\s(]+" + _NUM,
                               r"--gpu-memory-utilization[= ]" + _NUM,
                               r"'gpu_memory_utilization': " + _NUM),
    # (the V1 init snapshot's non_torch_memory, after ', ', is the CUDA context, not the profile's)
    "non_torch_gib": (r"(?<!, )non_torch_memory(?:=|\s+takes\s+|\s+)" + _NUM + r"\s*GiB",
                      r"non-torch forward increase memory:\s*" + _NUM + r"\s*GiB"),  # V1 DEBUG
    "activation_gib": (r"PyTorch activation peak memory(?:\s+takes)?\s+" + _NUM + r"\s*GiB",
                       r"torch peak memory increase:\s*" + _NUM + r"\s*GiB"),  # V1 DEBUG
    "peak_torch_gib": (r"peak_torch_memory=" + _NUM + r"GiB",),  # 0.6.4: includes weights
    # free memory when the worker started (V1 from 0.9.2: request_memory's check)
    "free_at_start_gib": (r"Free memory on device[^(]*\(" + _NUM + r"/[0-9.]+ GiB\) on startup",
                          r"Initial free memory:\s*" + _NUM + r"\s*GiB"),
    "cuda_graph_gib": (r"Estimated CUDA graph memory:\s*" + _NUM + r"\s*GiB",),  # >= 0.18
    # earlier engines capture graphs after sizing the pool: reported, never subtracted
    "graph_capture_gib": (r"Graph capturing finished in [0-9.]+ secs?, took\s*" + _NUM
                          + r"\s*GiB",),
    "kv_pool_gib": (
        r"Available KV cache memory:\s*" + _NUM + r"\s*GiB",  # V1
        r"kv_cache_size=" + _NUM + r"GiB",  # V0 0.6.4
        r"reserved for KV Cache is\s+" + _NUM + r"\s*GiB",  # V0 0.6.6 - 0.10
        r"available_kv_cache_memory\s+" + _NUM + r"\s*GiB",  # V0 development table
        r"available KV cache memory \(" + _NUM + r" GiB\)",  # V1 check_enough_kv_cache_memory
    ),
    "num_gpu_blocks": (r"(?:GPU|cuda|CUDA) blocks:\s*" + _INT,),
    "kv_cache_tokens": (r"KV cache size:\s*" + _INT + r" tokens",),  # also 0.28's one line
    "max_model_len": (r"Maximum concurrency for " + _INT + r" tokens per request",
                      r"max seq len \(" + _INT + r"\)", r"'max_model_len': " + _INT,
                      r"max_seq_len=" + _INT, r"--max-model-len[= ]" + _INT),
    "max_concurrency": (r"tokens per request:\s*" + _NUM + r"x",),
    "v0_max_tokens": (r"maximum number of tokens that can be stored in KV cache \(" + _INT
                      + r"\)",),
    "needed_gib": (r"\(" + _NUM + r" GiB KV cache is needed",),
    "estimated_max_len": (r"estimated maximum model length is " + _INT,),
    "tensor_parallel_size": (r"'tensor_parallel_size': " + _INT, r"tensor_parallel_size=" + _INT,
                             r"--tensor-parallel-size[= ]" + _INT),
    "max_num_batched_tokens": (r"'max_num_batched_tokens': " + _INT,
                               r"max_num_batched_tokens=" + _INT,
                               r"--max-num-batched-tokens[= ]" + _INT),
    "max_num_seqs": (r"'max_num_seqs': " + _INT, r"--max-num-seqs[= ]" + _INT),
    # a multimodal model's encoder profile (V1 >= 0.8, vllm/v1/worker/gpu_model_runner.py)
    "encoder_budget_tokens": (r"Encoder cache will be initialized with a budget of " + _INT
                              + r" tokens",),
    "encoder_profiled_items": (r"and profiled with " + _INT + r" \w+ items of the maximum "
                               r"feature size",),
}
TEXT_PATTERNS = {
    "version": (r"vLLM API server version v?([0-9][\w.+]*)", r"LLM engine \(v([0-9][\w.+]*)\)",
                r"\bversion v?([0-9]+\.[0-9]+\.[0-9][\w.+]*)\b"),
    "kv_cache_dtype": (r"'kv_cache_dtype': '([\w]+)'", r"kv_cache_dtype=([\w]+)",
                       r"--kv-cache-dtype[= ]([\w]+)"),
    "model": (r"\bmodel='([^']+)'", r'\bmodel="([^"]+)"',
              r"Starting to load model (\S+?)(?:\.\.\.|\s|$)", r"vllm serve (/?[\w./-]+)",
              r"pretrained=([^,\s]+)"),
}
FAILURES = (("EngineCore failed to start", "EngineCore failed to start"),
            ("No available memory for the cache blocks", "no memory for the cache blocks"),
            ("maximum number of tokens that can be stored in KV cache",
             "max_model_len exceeds the KV cache"),
            ("To serve at least one request", "one max_model_len request does not fit"),
            ("CUDA out of memory", "CUDA out of memory"),
            ("WorkerProc hit an exception", "a worker failed"),
            ("OutOfMemoryError", "CUDA out of memory"))
CONNECTORS = ("LMCacheConnectorV1", "LMCacheConnector", "LMCache", "NixlConnector",
              "MooncakeStoreConnector", "MooncakeConnector", "SharedStorageConnector",
              "OffloadingConnector")
# The lines vLLM's top-k/top-p sampler prints when it is built (vllm/v1/sample/ops/
# topk_topp_sampler.py): "Using FlashInfer for top-p & top-k sampling." (info_once, @3babc05
# and @01fa3fe); 0.8 - 0.11.1 warn "... Falling back to the PyTorch-native implementation of
# top-p & top-k sampling" (topk_topp_sampler.py:69 in vllm-project/vllm#17898, 0.8.5);
# @01fa3fe (FlashInfer the default) "FlashInfer top-p/top-k sampling unavailable: ...; falling
# back." and "... disabled via VLLM_USE_FLASHINFER_SAMPLER=0.", whose native path is
# apply_top_k_top_p_triton. Only these set the sampler: an attention-backend line listing
# FLASHINFER ("out of potential backends: [...]") says nothing about sampling.
SAMPLER_MARKS = (("Using FlashInfer for top-p & top-k sampling", FLASHINFER),
                 ("Falling back to the PyTorch-native implementation of top-p & top-k "
                  "sampling", TORCH),
                 ("FlashInfer top-p/top-k sampling unavailable", TRITON),
                 ("FlashInfer top-p/top-k sampling disabled via", TRITON))
MXFP4_MARKS = (("marlin_utils_fp4", "marlin"), ("Using Marlin backend", "marlin"),
               ("Using Triton backend", "triton"), ("FlashInfer MXFP4", "flashinfer"))
DRAFT_MARKS = ("speculative_config={", "'speculative_config': {", "eagle", "EAGLE",
               "draft model", "'method': 'mtp'", "num_speculative_tokens")
# Wordings only some releases print: the release a log without a version line came from
FORMAT_VERSIONS = (("peak_torch_memory=", "0.6.4", "its one-line 'Memory profiling results'"),
                   ("available_kv_cache_memory", "0.6.5", "the profiling table of 0.6.5's "
                    "development"),
                   ("the rest of the memory reserved for KV Cache", "0.6.5",
                    "V0's 'Memory profiling takes' sentence (0.6.5 - 0.10)"))
V1_MARKS = ("Available KV cache memory", "GPU KV cache size", "EngineCore", "V1 engine",
            "To serve at least one request")
# torch.compile compiled in this start, its cache cold (vllm/compilation/backends.py: 'for
# general shape' / 'for shape' to 0.10, 'for dynamic shape' 0.11, 'for compile range' from 0.19);
# a warm start prints 'Directly load the compiled graph(s)' or 'Directly load AOT compilation'
COLD_COMPILE = "Compiling a graph for "
# --enforce-eager as the engine's config line, the non-default args or the command show it
EAGER = r"enforce_eager=True|'enforce_eager': True|--enforce-eager\b"
STAGE = re.compile(r"Worker_PP(\d+)")
RANK = re.compile(r"(?:rank=|Worker_TP|Worker_PP|TP|rank )(\d+)")
MEMORY_WORDS = re.compile(r"GiB|\bGB\b|blocks|KV cache|memory", re.IGNORECASE)
INTEGER_FIELDS = {"num_gpu_blocks", "kv_cache_tokens", "max_model_len", "v0_max_tokens",
                  "estimated_max_len", "tensor_parallel_size", "max_num_batched_tokens",
                  "max_num_seqs", "encoder_budget_tokens", "encoder_profiled_items"}


@dataclass(frozen=True)
class LineRead:
    """One line of the log that carried memory: its number, what was read from it."""

    number: int
    text: str
    read: str


@dataclass(frozen=True)
class LogFacts:
    """The figures one startup (the first in the log) printed; None where it printed none.
    GiB figures are as printed: rounded to 2 (or 4) decimals. rank_pools: each rank's
    'Available KV cache memory' where the log says which rank printed it; kv_pool_gib is the
    smallest (vLLM gives every rank the smallest rank's blocks)."""

    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    gpu_memory_utilization: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    peak_torch_gib: float | None = None
    free_at_start_gib: float | None = None
    cuda_graph_gib: float | None = None
    graph_capture_gib: float | None = None
    kv_pool_gib: float | None = None
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_model_len: int | None = None
    max_concurrency: float | None = None
    v0_max_tokens: int | None = None
    needed_gib: float | None = None
    estimated_max_len: int | None = None
    tensor_parallel_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    encoder_budget_tokens: int | None = None
    encoder_profiled_items: int | None = None
    engine_version: str = "v1"
    model: str | None = None
    version: str | None = None
    format_version: tuple[str, str] | None = None
    kv_cache_dtype: str | None = None
    failure: str | None = None
    connectors: tuple[str, ...] = ()
    sampler: str | None = None
    mxfp4_backend: str | None = None
    draft: bool = False
    rank_pools: tuple[tuple[int, float], ...] = ()
    rank_pools_by_stage: bool = False  # keyed by pipeline stage (Worker_PP<n>), not by rank
    release: str | None = None
    release_basis: str = ""
    args: tuple[tuple[str, object], ...] = ()
    args_with_defaults: bool = False  # V0's Namespace: every argument, defaults among them
    # --num-gpu-blocks-override: the blocks the engine ran; num_gpu_blocks is the profile's
    blocks_override: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    allreduce_off: str | None = None
    enforce_eager: bool = False
    cold_compile: bool = False  # torch.compile compiled in the profiled start
    lines: tuple[LineRead, ...] = field(default_factory=tuple)

    @property
    def activation_peak_gib(self) -> float | None:
        """0.6.4 logs peak_torch_memory with the weights inside it; others log the increase."""
        if self.activation_gib is not None:
            return self.activation_gib
        if self.peak_torch_gib is not None and self.weights_gib is not None:
            return round(self.peak_torch_gib - self.weights_gib, 4)
        return None

    @property
    def started(self) -> bool | None:
        """False when the log shows a failed start; None when it shows no failure."""
        return False if self.failure else None

    def gib_bytes(self, name: str) -> int | None:
        value = getattr(self, name)
        return None if value is None else round(value * GiB)


_STARTUP_TOTAL = re.compile(r"Free memory on device[^(]*\([0-9.]+/([0-9.]+) GiB\) on startup")


def startup_total_gib(facts: LogFacts) -> float | None:
    """The device total V1's 'Free memory on device (free/total GiB) on startup' line prints
    (from 0.9.2), rounded to 0.01 GiB: what a log without total_gpu_memory says of the
    device; None when it has no such line."""
    for line in facts.lines:
        if (match := _STARTUP_TOTAL.search(line.text)) is not None:
            return float(match.group(1))
    return None


def parse_vllm_log(text: str, source: str = "log") -> LogFacts:
    """The first occurrence of each figure; fails when none is recognised. Lines starting
    with '#' are comments (a quoted log's provenance) unless they are V0's '# GPU blocks'.
    Every line that carries memory is kept with what was read from it ('' when nothing)."""
    numbered = _first_startup([(n, line) for n, line in enumerate(text.splitlines(), 1)
                               if not line.lstrip().startswith("#") or "blocks:" in line])
    body = "\n".join(line for _, line in numbered)
    found = {}
    for name, patterns in PATTERNS.items():
        value = _first(body, patterns)
        if value is not None:
            found[name] = _number(name, value.replace(",", ""), source)
    plain = [line for _, line in numbered]
    args, with_defaults = args_read(plain)
    override = dict(args).get("num_gpu_blocks_override")
    overrides = re.finditer(OVERRIDE.format(override), body) if isinstance(override, int) \
        and not isinstance(override, bool) else ()
    profiled = next((m for m in overrides if int(m.group(1)) > 0), None)
    if profiled:  # the blocks, token and concurrency lines print the override, not the
        # profile's count, which is the one the release's rules predict
        found["num_gpu_blocks"] = _number("num_gpu_blocks", profiled.group(1), source)
        found["blocks_override"] = override
        found.pop("kv_cache_tokens", None)
        found.pop("max_concurrency", None)
    resolved = body.find(RESOLVED)
    later = _first(body[resolved:], PATTERNS["max_num_batched_tokens"]) if resolved >= 0 \
        else None
    if later is not None:  # the engine's value, not a line printed before it knew the model
        found["max_num_batched_tokens"] = _number("max_num_batched_tokens", later, source)
    if not any(k in found for k in ("weights_gib", "kv_pool_gib", "kv_cache_tokens",
                                    "num_gpu_blocks", "v0_max_tokens", "max_concurrency",
                                    "free_at_start_gib")):
        allowed = "none of vLLM's startup lines (model loading, memory profiling, GPU blocks, " \
                  "available KV cache memory, GPU KV cache size, maximum concurrency, free " \
                  "memory on startup) found; an SGLang or TensorRT-LLM log is read with " \
                  "--engine sglang or --engine trtllm"
        raise SpecError("log", source, allowed)
    free = [float(m.group(1)) for _, line in numbered
             for m in [re.search(PATTERNS["free_at_start_gib"][0], line)] if m]
    if free:
        found["free_at_start_gib"] = min(free)  # the rank with the least free memory refuses
    ranks = _rank_pools(numbered)
    if ranks:
        found["kv_pool_gib"] = min(value for _, value in ranks)
    text_found = {name: _first(body, patterns) for name, patterns in TEXT_PATTERNS.items()}
    known = {f.name for f in fields(LogFacts)}
    worded = next(((v, why) for mark, v, why in FORMAT_VERSIONS if mark in body), None)
    release = release_of(text_found["version"], plain)
    if release.version is None and worded is not None:
        release = LoggedRelease(worded[0], f"the log states no version; {worded[1]} is "
                                f"{worded[0]}'s")
    return LogFacts(
        release=release.version, release_basis=release.basis, args=args,
        args_with_defaults=with_defaults,
        env=logged_env(plain), allreduce_off=allreduce_off(plain),
        enforce_eager=bool(re.search(EAGER, body)), cold_compile=COLD_COMPILE in body,
        engine_version="v1" if any(mark in body for mark in V1_MARKS) else "v0",
        failure=next((why for mark, why in FAILURES if mark in body), None),
        connectors=tuple(c for c in CONNECTORS if c in body and not any(
            c != other and c in other and other in body for other in CONNECTORS)),
        sampler=next((kind for mark, kind in SAMPLER_MARKS if mark in body), None),
        mxfp4_backend=next((kind for mark, kind in MXFP4_MARKS if mark in body), None),
        draft=any(mark in body for mark in DRAFT_MARKS), rank_pools=ranks,
        rank_pools_by_stage=bool(ranks) and "Worker_PP" in body,
        format_version=worded,
        lines=tuple(_lines_read(numbered)), **{k: v for k, v in text_found.items() if v},
        **{k: v for k, v in found.items() if k in known})


def _first_startup(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines up to the second startup (a log quoting several runs: the first is read);
    a startup begins where the weights are loaded, once per rank (the profile's summary of
    them, later in the same start, begins none; in an excerpt that cut the loading lines,
    the summaries mark the starts)."""
    def lines_of(patterns: tuple[str, ...]) -> list[int]:
        return [i for i, (_, line) in enumerate(numbered)
                if any(re.search(p, line) for p in patterns)
                and not RANK.search(line) and "pid=" not in line]

    starts = lines_of(WEIGHTS_LOADED) or lines_of(PATTERNS["weights_gib"])
    return numbered[:starts[1]] if len(starts) > 1 else numbered


def _rank_pools(numbered: list[tuple[int, str]]) -> tuple[tuple[int, float], ...]:
    """'Available KV cache memory' per rank, where the line names its rank; by pipeline stage
    where the workers are named by it (vLLM 0.11 on: Worker_PP<stage>[_TP<rank>])."""
    out = {}
    for _, line in numbered:
        pool = re.search(r"Available KV cache memory:\s*" + _NUM, line)
        rank = STAGE.search(line) or RANK.search(line)
        if pool and rank:
            out.setdefault(int(rank.group(1)), float(pool.group(1).replace(",", "")))
    return tuple(sorted(out.items())) if len(out) > 1 else ()


def _lines_read(numbered: list[tuple[int, str]]):
    """Each line that matched a pattern, with the fields it gave; and each other line that
    mentions memory, with '' (read, nothing vLLM-defined in it) so none is dropped silently."""
    for number, line in numbered:
        names = [name for name, patterns in PATTERNS.items()
                 if any(re.search(p, line) for p in patterns)]
        names += [why for mark, why in FAILURES if mark in line]
        names += [f"connector {c}" for c in CONNECTORS if c in line][:1]
        names += [f"sampler {kind}" for mark, kind in SAMPLER_MARKS if mark in line][:1]
        names += [f"MXFP4 kernel {kind}" for mark, kind in MXFP4_MARKS if mark in line][:1]
        names += ["speculative decoding"] if any(m in line for m in DRAFT_MARKS) else []
        names += ["num_gpu_blocks override (the profile's count, then the override)"] \
            if re.search(OVERRIDE.format("[0-9]+"), line) else []
        names += ["vLLM version"] if any(re.search(p, line)
                                         for p in TEXT_PATTERNS["version"]) else []
        names += ["flags"] if logged_args([line]) else []
        names += ["environment"] if logged_env([line]) else []
        names += [f"custom all-reduce off ({why})"] if (why := allreduce_off([line])) else []
        if names or MEMORY_WORDS.search(line):
            yield LineRead(number, line.strip(), ", ".join(dict.fromkeys(names)))


def _number(name: str, digits: str, source: str) -> int | float:
    """A logged figure; one with more digits than any real figure is refused, not parsed
    (int() past 4,300 digits raises; a float past 1e308 is inf)."""
    if len(digits) > 30:
        raise SpecError(name, digits, f"a figure of {len(digits):,} digits is not a vLLM value "
                        f"(in {source})")
    return int(digits) if name in INTEGER_FIELDS else float(digits)


def _first(text: str, patterns: tuple[str, ...]) -> str | None:
    """The earliest match of any pattern (the first startup in a log of several)."""
    hits = [m for p in patterns if (m := re.search(p, text))]
    return min(hits, key=lambda m: m.start()).group(1) if hits else None
