"""The simulated vLLM release's own choices beside its memory row: the version as asked (the
scheduling table is keyed by release, sim/vllm_releases.py), its batch limits for the device,
whether the host's work overlaps the GPU's and why, and the async flags it refuses."""

from servecap.ledger.errors import SpecError
from servecap.ledger.serve import ServeSpec
from servecap.ledger.vllm_batch import LONG_CONTEXT, batch_defaults
from servecap.ledger.vllm_versions import VllmRow, choose, parse_version
from servecap.sim.vllm_releases import (
    ABSENT,
    BatchLimits,
    batch_limits,
    overlap,
    scheduling_for,
)


def asked_version(engine_text: str, row: VllmRow) -> tuple[int, ...]:
    """The release an --engine spelling asks for ('vllm==0.15' -> (0, 15)); the row's own
    version for a bare 'vllm'."""
    asked = choose(engine_text).asked
    return row.version if asked == "vllm" else parse_version(asked)


def release_batch_limits(row: VllmRow, version: tuple[int, ...], serve: ServeSpec,
                         offline: bool) -> BatchLimits | None:
    """max_num_batched_tokens and max_num_seqs the release defaults to on the plan's device
    (V1: sim/vllm_releases.py; V0: max(max_model_len, 2048) tokens and 256 sequences,
    ledger/vllm_batch.py batch_defaults); None for V0 above 32K tokens of context (its
    chunked default is not simulated), which keeps the ledger's defaults."""
    if row.formula == "v0":
        if serve.context_tokens > LONG_CONTEXT:
            return None
        batch = batch_defaults(row.formula, row.version, serve.device_bytes,
                               serve.device_label, serve.context_tokens)
        return BatchLimits(batch.tokens, batch.seqs, f"{row.tag}: {batch.how}")
    return batch_limits(version, serve.device_bytes, serve.device_label, offline)


def overlap_label(row: VllmRow, version: tuple[int, ...], async_scheduling: bool | None,
                  pipeline_parallel_size: int, draft_model: bool = False) -> dict:
    """Whether the host's work overlaps the GPU's and why (citing vLLM's source at the
    tag), and for V1 what the release does in scheduling: the engine label's additions."""
    if row.formula == "v0":
        return {"host_gpu_overlap": False, "overlap_why": f"{row.tag}: V0 has no async "
                "scheduling (vllm/engine/llm_engine.py runs the host's work between steps)"}
    release = scheduling_for(version)
    ov = overlap(release, async_scheduling, pipeline_parallel_size, draft_model)
    return {"host_gpu_overlap": ov.overlap, "overlap_why": ov.why,
            "scheduling": {"release_row": release.tag,
                           "async_scheduling": release.async_scheduling,
                           "cudagraph_mode": release.cudagraph_mode,
                           "chunked_prefill": "always (V1)", "source": release.source}}


def check_async(row: VllmRow, version: tuple[int, ...], async_scheduling: bool | None,
                name: str) -> None:
    """--async-scheduling / --no-async-scheduling on a release without the option (V0, and
    V1 before 0.10) is an error naming the flag and the release."""
    if async_scheduling is None:
        return
    flag = "--async-scheduling" if async_scheduling else "--no-async-scheduling"
    if row.formula == "v0":
        raise SpecError(flag, True, f"V1 only (vllm>=0.10); {name} is V0")
    release = scheduling_for(version)
    if release is not None and release.async_scheduling == ABSENT:
        raise SpecError(flag, True, f"vllm>=0.10: vLLM {'.'.join(map(str, version))} has no "
                        f"async scheduling ({release.tag}: {release.async_source})")
