"""Which vLLM model runner a release runs a model on (V1 or Model Runner V2, whose profile pass
differs), and the rules that follow from it: whether the CUDA-graph estimate is subtracted,
which sampler the profile pass runs, and the tokens a sliding window reserves in flight."""

from .model import ModelSpec
from .vllm_row import (
    MRV2,
    RUNNER_ALL,
    RUNNER_LISTED,
    RUNNER_LISTED_DENSE,
    RUNNER_LISTED_OR_DENSE,
    RUNNER_LISTED_OR_DENSE_STATE_LISTED,
    VllmRow,
)

V1_RUNNER, V2_RUNNER = "v1", "v2"
RUNNERS = (V1_RUNNER, V2_RUNNER)
ASYNC_BATCHES = 2  # max_concurrent_batches with async scheduling on the V1 runner, pp = 1


def model_runner(row: VllmRow, spec: ModelSpec, asked: str | None = None) -> tuple[str, str]:
    """(runner, why): the one asked for (VLLM_USE_V2_MODEL_RUNNER), else the release's default
    for this model's architecture, MoE-ness, quantization and state layers (VllmRow.runner_rule;
    vLLM's is_moe, is_quantized and is_hybrid)."""
    if asked is not None:
        return asked, f"asked: VLLM_USE_V2_MODEL_RUNNER={int(asked == V2_RUNNER)}"
    listed = spec.architecture in row.mrv2_archs
    moe, state = spec.moe is not None, bool(spec.state_layers)
    v2 = {RUNNER_LISTED_DENSE: listed and not moe and spec.quant is None and not state,
          RUNNER_LISTED: listed and not state,
          RUNNER_LISTED_OR_DENSE: not state and (listed or not moe),
          RUNNER_LISTED_OR_DENSE_STATE_LISTED: listed or not (state or moe),
          RUNNER_ALL: True}.get(row.runner_rule, False)
    arch = spec.architecture or "an unnamed architecture"
    return (V2_RUNNER if v2 else V1_RUNNER), f"{row.name}: {row.runner_rule} ({arch}" + (
        ", MoE" if moe else "") + (", state layers" if state else "") + ")"


def graphs_subtracted(row: VllmRow, runner: str) -> bool:
    """The CUDA-graph estimate is taken out of the pool: the row's rule on the V1 runner; on
    V2 only where its profile_cudagraph_memory() measures (VllmRow.mrv2_graphs_estimated)."""
    return row.graphs_subtracted and (runner == V1_RUNNER or row.mrv2_graphs_estimated)


def profile_sampler(runner: str, sampler: str | None) -> str | None:
    """The sampler path of the profile pass: V2's own sampler (MRV2) on Model Runner V2, where
    the V1 runner's top-k/top-p path (a log's or --sampler's, else the row's) does not run."""
    return MRV2 if runner == V2_RUNNER else sampler


def window_in_flight(row: VllmRow, runner: str, batched_tokens: int, pp: int = 1,
                     async_scheduling: bool = True) -> tuple[int, str]:
    """Tokens a sliding-window or chunked-local layer reserves beyond its window: T before
    0.26; from 0.26 max_in_flight_tokens = max_concurrent_batches x T, the batches being
    pp + 1 on V2 and 2 on the V1 runner (pp there, which runs no async scheduling with
    pipeline stages) with async scheduling, vLLM's default; pp without it."""
    if not row.window_in_flight:
        return batched_tokens, f"{batched_tokens:,} batched tokens"
    if not async_scheduling:
        batches = pp
    else:
        batches = pp + 1 if runner == V2_RUNNER else (ASYNC_BATCHES if pp == 1 else pp)
    return batches * batched_tokens, (f"{batches} in-flight batches x {batched_tokens:,} "
                                      f"batched tokens ({row.name}, {runner} runner)")
