"""The deployment rows of the Inputs sheet: parallel sizes, engine, its knobs, measured lines."""

from servecap.ledger.engines import (
    DEFAULT_FREE_GPU_MEMORY_FRACTION,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    SGLANG,
    SGLANG_DEFAULT_FRACTIONS,
    TRTLLM,
    VLLM,
)
from servecap.ledger.vllm_versions import choose

from . import style
from .source import WorkbookSource

# (defined name, DeployFlags field): measured lines as typed, replayed by --from-workbook.
MEASURED = (("non_torch", "non_torch"), ("measured_weights", "weights"),
            ("comm_buffer", "comm_buffer"), ("cuda_graph_memory", "cuda_graph_memory"))
FRACTIONS = {VLLM: "gpu_memory_utilization", SGLANG: "mem_fraction_static",
             TRTLLM: "free_gpu_memory_fraction"}


def engine_base(engine: str) -> str:
    """'vllm==0.10.2' (the engine cell of a pinned vLLM release) -> 'vllm'."""
    return VLLM if str(engine).startswith(VLLM) else engine


def default_fraction(engine: str, tp: int, pp: int) -> float | None:
    """The engine's own default for its memory knob (SGLang's depends on the GPUs a stage sees:
    ledger.plan counts tp x 2 once the model is split into stages; vLLM's on its release)."""
    if engine_base(engine) == VLLM:
        return choose(engine).row.default_gpu_memory_utilization if engine != VLLM \
            else DEFAULT_GPU_MEMORY_UTILIZATION
    if engine == TRTLLM:
        return DEFAULT_FREE_GPU_MEMORY_FRACTION
    if engine == SGLANG:
        world = tp * (1 if pp == 1 else 2)
        return next(f for size, f in SGLANG_DEFAULT_FRACTIONS if world >= size)
    return None


def _engine_text(typed, name: str) -> str:
    """The engine as typed when it pins a vLLM release ('vllm==0.10'), else its name."""
    text = str(typed or name).strip().lower()
    return text if name == VLLM and text.startswith(VLLM) else name


def deploy_rows(src: WorkbookSource) -> list[tuple]:
    """(name, value, number format, unit, meaning) rows; a fraction knob holds its effective
    value (the engine's default when none was given)."""
    flags = dict(src.deploy_flags)
    engine = src.engine
    tp, pp = flags.get("tensor_parallel_size", 1), flags.get("pipeline_parallel_size", 1)
    rows = [
        ("tensor_parallel_size", tp, style.COUNT, "GPUs", "-tp: GPUs that shard each layer"),
        ("pipeline_parallel_size", pp, style.COUNT, "GPUs",
         "-pp: GPUs that split the layers into stages"),
        ("data_parallel_size", flags.get("data_parallel_size", 1), style.COUNT, "replicas",
         "-dp: replicas of the tp x pp group"),
        ("engine", _engine_text(flags.get("engine"), engine.name), None, "text",
         "budget semantics: plain, vllm==X.Y (a vLLM release's rules), sglang, trtllm"),
    ]
    knob = FRACTIONS.get(engine.name)
    if knob:
        value = getattr(engine, knob) or (engine.default_utilization if engine.name == VLLM
                                          else default_fraction(engine.name, tp, pp))
        rows.append((knob, value, "0.00", "fraction", f"{engine.name}'s memory knob "
                     "(its own flag name; the default when none was given)"))
    if engine.name == VLLM:
        rows.append(("kv_cache_memory_bytes", engine.kv_cache_memory_bytes, style.BYTES,
                     "bytes", "vLLM --kv-cache-memory: blank = sized by gpu_memory_utilization"))
    for name, field in MEASURED:
        rows.append((name, flags.get(field), None, "size text",
                     f"--{field.replace('_', '-')} as given; blank = servecap's estimate"))
    return rows
