"""Read the memory figures out of a vLLM startup log's text (V0 and V1 formats)."""

import re
from dataclasses import dataclass, fields

from .errors import SpecError
from .units import GiB

_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
# field -> patterns, in the wordings vLLM has printed since 0.6 (see each pattern's comment)
PATTERNS: dict[str, tuple[str, ...]] = {
    "weights_gib": (
        r"Loading model weights took " + _NUM + r" GB",  # V0 model_runner (value is GiB)
        r"Model loading took " + _NUM + r" Gi?B",  # V0 >= 0.6.5 and V1
        r"model weights take\s+" + _NUM + r"\s*GiB",  # V0 profiling summary / table
    ),
    "total_gpu_gib": (r"total_gpu_memory[=\s(]+" + _NUM + r"\s*GiB",),
    "gpu_memory_utilization": (r"gpu_memory_utilization[=\s(]+" + _NUM,),
    "non_torch_gib": (r"non_torch_memory(?:=|\s+takes\s+|\s+)" + _NUM + r"\s*GiB",),
    "activation_gib": (r"PyTorch activation peak memory(?:\s+takes)?\s+" + _NUM + r"\s*GiB",),
    "peak_torch_gib": (r"peak_torch_memory=" + _NUM + r"GiB",),  # 0.6.4: includes weights
    "cuda_graph_gib": (r"Estimated CUDA graph memory:\s*" + _NUM + r"\s*GiB",),  # >= 0.19
    # earlier engines capture graphs after sizing the pool: reported, never subtracted
    "graph_capture_gib": (r"Graph capturing finished in [0-9.]+ secs?, took\s*" + _NUM
                          + r"\s*GiB",),
    "kv_pool_gib": (
        r"Available KV cache memory:\s*" + _NUM + r"\s*GiB",  # V1
        r"kv_cache_size=" + _NUM + r"GiB",  # V0 0.6.4
        r"reserved for KV Cache is\s+" + _NUM + r"\s*GiB",  # V0 0.6.6 - 0.10
        r"available_kv_cache_memory\s+" + _NUM + r"\s*GiB",  # V0 development table
    ),
    "num_gpu_blocks": (r"(?:GPU|cuda) blocks:\s*" + _NUM,),
    "kv_cache_tokens": (r"KV cache size:\s*" + _NUM + r" tokens",),  # also 0.33's one line
    "max_model_len": (r"Maximum concurrency for " + _NUM + r" tokens per request",),
    "max_concurrency": (r"tokens per request:\s*" + _NUM + r"x",),
}
MODEL_PATTERNS = (r"\bmodel='([^']+)'", r'\bmodel="([^"]+)"', r"Starting to load model (\S+)",
                  r"vllm serve (\S+)", r"pretrained=([^,\s]+)")
V1_MARKS = ("Available KV cache memory", "GPU KV cache size", "EngineCore", "V1 engine")


@dataclass(frozen=True)
class LogFacts:
    """The figures one startup (the first in the log) printed; None where it printed none.
    GiB figures are as printed: rounded to 2 (or 4) decimals."""

    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    gpu_memory_utilization: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    peak_torch_gib: float | None = None
    cuda_graph_gib: float | None = None
    graph_capture_gib: float | None = None
    kv_pool_gib: float | None = None
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_model_len: int | None = None
    max_concurrency: float | None = None
    engine_version: str = "v1"
    model: str | None = None

    @property
    def activation_peak_gib(self) -> float | None:
        """0.6.4 logs peak_torch_memory with the weights inside it; others log the increase."""
        if self.activation_gib is not None:
            return self.activation_gib
        if self.peak_torch_gib is not None and self.weights_gib is not None:
            return round(self.peak_torch_gib - self.weights_gib, 4)
        return None

    def gib_bytes(self, name: str) -> int | None:
        value = getattr(self, name)
        return None if value is None else round(value * GiB)


def parse_vllm_log(text: str, source: str = "log") -> LogFacts:
    """The first occurrence of each figure; fails when none is recognised. Lines starting
    with '#' are comments (a quoted log's provenance) unless they are V0's '# GPU blocks'."""
    text = "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("#") or "blocks:" in line)
    found = {}
    for name, patterns in PATTERNS.items():
        value = _first(text, patterns)
        if value is not None:
            found[name] = _number(name, value.replace(",", ""), source)
    if not found:
        allowed = "none of vLLM's startup lines (model loading, memory profiling, GPU blocks, " \
                  "available KV cache memory, GPU KV cache size, maximum concurrency) found"
        raise SpecError("log", source, allowed)
    version = "v1" if any(mark in text for mark in V1_MARKS) else "v0"
    model = _first(text, MODEL_PATTERNS)
    known = {f.name for f in fields(LogFacts)}
    return LogFacts(engine_version=version, model=model,
                    **{k: v for k, v in found.items() if k in known})


def _number(name: str, digits: str, source: str) -> int | float:
    """A logged figure; one with more digits than any real figure is refused, not parsed
    (int() past 4,300 digits raises; a float past 1e308 is inf)."""
    if len(digits) > 30:
        raise SpecError(name, digits, f"a figure of {len(digits):,} digits is not a vLLM value "
                        f"(in {source})")
    integer = name in ("num_gpu_blocks", "kv_cache_tokens", "max_model_len")
    return int(digits) if integer else float(digits)


def _first(text: str, patterns: tuple[str, ...]) -> str | None:
    """The earliest match of any pattern (the first startup in a log of several)."""
    hits = [m for p in patterns if (m := re.search(p, text))]
    return min(hits, key=lambda m: m.start()).group(1) if hits else None
