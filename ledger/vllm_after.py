"""What vLLM runs after sizing its KV pool, against the memory the pool leaves: CUDA-graph capture
(where the release does not subtract it) and V1's sampler warm-up (compile_or_warm_up_model).
A start whose pool holds a request can still fail here; each term is the release's rule."""

from dataclasses import dataclass

from .devices import NVLINK, sm_count, tp_link
from .engines import Budget, EngineSpec
from .kv import Shard
from .lines import Line
from .model import ModelSpec
from .serve import ServeSpec
from .units import GiB, MiB
from .vllm_lines import graph_limit, runner, sampler_state
from .vllm_profile import (
    act_bytes,
    forward_peak,
    graph_estimate,
    moe_workspace,
    sampler_inputs,
    sampler_peak,
)
from .vllm_row import ALLOCATED, FLASHINFER, PROFILED, VllmRow
from .vllm_runner import V2_RUNNER

# Memory in use before vLLM's baseline, so outside its budget: the CUDA context ('worker init
# memory snapshot: ... cuda_memory=0.51GiB' on one H100, vLLM 0.19 logs of the regression set),
# and from 0.11, where the snapshot follows init_worker_distributed_environment ('Now take
# memory snapshot after NCCL is initialized', vllm/v1/worker/gpu_worker.py @v0.11.0), NCCL's
# communicators over NVLink (cuda_memory=1.53-1.55 GiB at tp 2 and 4 in the same logs: +1 GiB).
# Rows that measure device-wide use (ALLOCATED) count both inside the budget. Estimates.
CUDA_CONTEXT = 512 * MiB
NCCL_INIT_NVLINK = 1 * GiB
SNAPSHOT_AFTER_NCCL = (0, 11, 0)


@dataclass(frozen=True)
class AfterPool:
    """The memory left once the pool is allocated (room) and what runs in it afterwards."""

    room_bytes: int
    graphs_bytes: int
    warmup_bytes: int
    outside_bytes: int
    how: str
    max_num_seqs: int = 0  # the sampler warm-up's requests (the knob that shrinks it)

    @property
    def needed_bytes(self) -> int:
        return self.graphs_bytes + self.warmup_bytes

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.room_bytes

    def sentence(self) -> str:
        return (f"after sizing its pool vLLM needs {self.needed_bytes / GiB:.2f} GiB (CUDA "
                f"graphs {self.graphs_bytes / GiB:.2f} + sampler warm-up "
                f"{self.warmup_bytes / GiB:.2f}) where {self.room_bytes / GiB:.2f} GiB are left")


def after_pool(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine: EngineSpec,
               lines: tuple[Line, ...], result: Budget, batch) -> AfterPool:
    """room = device - what stays allocated once the pool exists (weights and their layout,
    non-torch, collective buffers, the pool's blocks) - what was in use before the baseline;
    the profile's activations are free again. needed = the graphs captured next (the declared
    --cuda-graph-memory, else the release's estimate) + the warm-up's peak."""
    row = engine.vllm_row
    held = sum(line.num_bytes for line in lines if line.key in HELD)
    pool = result.num_gpu_blocks * result.block_bytes
    outside, why = outside_baseline(row, shard, serve)
    unbudgeted = unbudgeted_sampler_state(spec, shard, engine, batch)
    if unbudgeted:
        outside += unbudgeted
        why += (f"; Model Runner V2's penalties state {unbudgeted / GiB:.2f} GiB, made after "
                f"loading, which {row.name}'s profile (torch peak increase) does not count")
    room = serve.device_bytes - held - pool - outside
    graphs = 0 if engine.enforce_eager else engine.cuda_graph_bytes \
        if engine.cuda_graph_bytes is not None else \
        graph_estimate(spec, shard, row, batch, graph_limit(engine, serve, spec))[0]
    warmup = warmup_peak(spec, shard, engine, batch, sm_count(serve.device_label))
    return AfterPool(room, graphs, warmup, outside, why, batch.seqs)


HELD = ("weights", "weight_metadata", "weights_resident", "rotary_cache", "encoder_weights",
        "lora_adapters", "eplb", "non_torch", "comm_buffers")


def unbudgeted_sampler_state(spec: ModelSpec, shard: Shard, engine: EngineSpec, batch) -> int:
    """Model Runner V2's penalties state (vllm_lines.sampler_state) where the release's
    budget leaves it out: a PROFILED row subtracts the torch peak's increase during the pass,
    and the state, made in load_model before it, is in both ends (vllm/utils/mem_utils.py
    memory_profiling at v0.26.0: torch_peak_increase = diff_profile.torch_peak); a CONSUMED row
    counts it (the non_torch line holds it)."""
    if engine.vllm_row.profile != PROFILED:
        return 0
    return sampler_state(engine, spec, shard, batch.seqs)


def outside_baseline(row: VllmRow, shard: Shard, serve: ServeSpec) -> tuple[int, str]:
    if row.profile == ALLOCATED:
        return 0, f"{row.name} counts the CUDA context and NCCL inside its budget"
    link, _ = tp_link(serve.device_label, serve.interconnect, shard.tensor_parallel_size,
                      serve.gpus_per_node)
    nccl = NCCL_INIT_NVLINK if (link == NVLINK
                                and row.version >= SNAPSHOT_AFTER_NCCL) else 0
    return CUDA_CONTEXT + nccl, (f"CUDA context {CUDA_CONTEXT / GiB:.2f} GiB" + (
        f" + NCCL communicators {nccl / GiB:.2f} GiB (before the baseline from 0.11)"
        if nccl else "") + " in use before vLLM's baseline (estimates)")


def warmup_peak(spec: ModelSpec, shard: Shard, engine: EngineSpec, batch,
                sms: int | None) -> int:
    """V1's compile_or_warm_up_model, after capture: _dummy_run(min(max_num_seqs,
    max_num_batched_tokens)) eager, then _dummy_sampler_run on its hidden states (on the V1
    runner also their gather and its rand_like copy, vllm/v1/worker/gpu_worker.py at v0.19.0
    compile_or_warm_up_model), with what the
    profile left allocated (fused-MoE workspaces where kept). V0 warms up no sampler. Model
    Runner V2's warmup_kernels samples with SamplingParams.for_sampler_warmup(): the fp32
    pipeline, priced as FlashInfer's path (vllm/v1/worker/gpu/warmup.py, from 0.22)."""
    if engine.kv_formula != "v1" or not shard.last_stage:
        return 0
    row, seqs = engine.vllm_row, min(batch.seqs, batch.tokens)
    kept = moe_workspace(spec, shard, batch.tokens) if row.moe_workspace_kept else 0
    hidden = seqs * spec.hidden_size * act_bytes(spec)
    v2 = runner(engine, spec) == V2_RUNNER
    if not v2:  # the V1 runner's gather and rand_like copy (vllm_profile.sampler_inputs)
        hidden = (hidden if row.profile_keeps_hidden else 0) + sampler_inputs(spec, seqs, row)
    path = FLASHINFER if v2 else engine.sampler
    sampler = sampler_peak(spec, row, seqs, path, sms)
    return kept + max(forward_peak(spec, shard, seqs), hidden + sampler)
