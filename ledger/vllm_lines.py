"""The ledger lines of a vLLM rank that come from its release's rules: resident weight layout,
the profile pass's activation peak, memory outside torch, collective buffers, CUDA graphs; and
the pool's paging rules that depend on the release, the model runner and the GPU."""

from dataclasses import dataclass

from .devices import compute_capability, sm_count, tp_link
from .kv import Shard
from .lines import Line
from .model import ModelSpec
from .serve import ServeSpec
from .vllm_batch import Batch, batch_defaults
from .vllm_profile import (
    activation_estimate,
    comm_estimate,
    graph_estimate,
    non_torch_estimate,
    penalties_state,
)
from .vllm_row import GRAPH_MAX_TOKENS
from .vllm_runner import (
    V2_RUNNER,
    graphs_subtracted,
    model_runner,
    profile_sampler,
    window_in_flight,
)
from .vllm_weights import mxfp4_backend, resident_extra

SM100 = 10  # compute capability major of B200, GB200, B300: their larger capture default
FLASHINFER_GDN_SM = (9, 0)  # FlashInfer's GDN prefill without further conditions: Hopper
# gpt-oss's own largest capture size, and the first row that holds it (graph_limit)
GPT_OSS, GPT_OSS_GRAPH_MAX, GPT_OSS_GRAPHS_FROM = "GptOssForCausalLM", 1024, (0, 11, 0)


@dataclass(frozen=True)
class PoolRules:
    """How a release pages this model on this GPU: the tokens a windowed layer reserves beyond
    its window, gated-DeltaNet checkpoint alignment, 'all' mode's chunk alignment, and why."""

    window_tokens: int
    checkpoint_alignment: int
    all_chunk_aligned: bool
    why: str


def runner(engine, spec: ModelSpec) -> str:
    """The model runner this engine's release runs the model on (ledger/vllm_runner.py)."""
    return model_runner(engine.vllm_row, spec, engine.model_runner)[0]


def sampler_state(engine, spec: ModelSpec, shard: Shard, seqs: int) -> int:
    """Model Runner V2's penalties state this rank holds (vllm_profile.penalties_state): its
    sampler is built on the last pipeline stage only; 0 on the V1 runner and elsewhere."""
    if not shard.last_stage or runner(engine, spec) != V2_RUNNER:
        return 0
    return penalties_state(spec, seqs)


def pool_rules(engine, spec: ModelSpec, serve: ServeSpec) -> PoolRules:
    """VllmRow.window_in_flight over the scheduler's max_num_batched_tokens (declared, else
    the release's default for this GPU: the profile batch's), gdn_checkpoint_alignment where
    FlashInfer's GDN prefill runs (SM 9.0; on Blackwell it needs CUDA 13, not assumed) and
    mamba_all_chunk_aligned."""
    row, run = engine.vllm_row, runner(engine, spec)
    batched = profile_batch(engine, serve).tokens
    tokens, why = window_in_flight(row, run, batched, engine.pipeline_parallel_size,
                                   engine.async_scheduling)
    hopper = compute_capability(serve.device_label) == FLASHINFER_GDN_SM
    return PoolRules(tokens, row.gdn_checkpoint_alignment if hopper else 0,
                     row.mamba_all_chunk_aligned, why)


def graph_limit(engine, serve: ServeSpec, spec: ModelSpec | None = None) -> int:
    """The largest CUDA-graph capture size: VllmRow.graph_max_sm100 on SM 10.x, else 512;
    gpt-oss raises it to 1,024 where no capture size is set (GptOssForCausalLMConfig
    verify_and_update_config, vllm/model_executor/models/config.py: the capture list to 1,024
    at v0.10.1-v0.11.0, max_cudagraph_capture_size = 1024 from v0.11.1 to v0.33.0; planned from
    the 0.11.0 row, as the 0.9.2 row also covers releases before it)."""
    capability = compute_capability(serve.device_label)
    limit = engine.vllm_row.graph_max_sm100 if capability and capability[0] == SM100 \
        else GRAPH_MAX_TOKENS
    if spec is not None and spec.architecture == GPT_OSS \
            and engine.vllm_row.version >= GPT_OSS_GRAPHS_FROM:
        return max(limit, GPT_OSS_GRAPH_MAX)
    return limit


def profile_batch(engine, serve: ServeSpec) -> Batch:
    """The tokens and sequences vLLM profiles with: the engine's own knobs, else the asked
    release's defaults for this device and entry point."""
    return batch_defaults(engine.vllm_row.formula, engine.release, serve.device_bytes,
                          serve.device_label, serve.context_tokens, engine.entrypoint,
                          engine.max_num_batched_tokens, engine.max_num_seqs)


def resident_line(spec: ModelSpec, shard: Shard, engine) -> tuple[Line, ...]:
    backend = engine.mxfp4_backend or mxfp4_backend(engine.native_fp4)
    extra = resident_extra(spec, shard, backend)
    if extra is None:
        return ()
    return (Line("weights_resident", "weight layout in vLLM (beyond the checkpoint)",
                 extra.extra_bytes, extra.reason),)


def runtime_line(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine) -> Line:
    size, how = activation_estimate(spec, shard, engine.vllm_row, profile_batch(engine, serve),
                                    profile_sampler(runner(engine, spec), engine.sampler),
                                    sm_count(serve.device_label),
                                    compute_capability(serve.device_label),
                                    engine.cold_compile)
    return Line("runtime_peak", "runtime peak", size, how)


def overhead(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine, pp: int) -> tuple[Line, ...]:
    """non-torch memory, collective buffers and (rows that subtract it) the CUDA-graph
    estimate; a declared value replaces each."""
    row, out = engine.vllm_row, []
    if engine.non_torch_bytes is not None:
        out.append(Line("non_torch", "non-torch memory", engine.non_torch_bytes,
                        "measured: --non-torch", True))
    else:
        penalties = sampler_state(engine, spec, shard, profile_batch(engine, serve).seqs)
        out.append(Line("non_torch", "non-torch memory", *non_torch_estimate(row, penalties)))
    if engine.comm_buffer_bytes is not None:
        out.append(Line("comm_buffers", "communication buffers", engine.comm_buffer_bytes,
                        "declared: --comm-buffer", True))
    else:
        link, why = tp_link(serve.device_label, serve.interconnect, shard.tensor_parallel_size,
                            serve.gpus_per_node)
        out.append(Line("comm_buffers", "communication buffers",
                        *comm_estimate(shard.tensor_parallel_size, pp, link, why,
                                       row.communicators_before_baseline)))
    if engine.enforce_eager:
        out.append(Line("cuda_graphs", "CUDA graph pool", 0, "none: --enforce-eager captures "
                        "no CUDA graphs (vLLM sets cudagraph_mode NONE)"))
    elif engine.cuda_graph_bytes is not None:
        out.append(Line("cuda_graphs", "CUDA graph pool", engine.cuda_graph_bytes,
                        "measured: --cuda-graph-memory", True))
    elif graphs_subtracted(row, runner(engine, spec)):
        out.append(Line("cuda_graphs", "CUDA graph pool",
                        *graph_estimate(spec, shard, row, profile_batch(engine, serve),
                                        graph_limit(engine, serve, spec))))
    return tuple(out)
