"""The ledger lines of a vLLM rank that come from its release's rules: resident weight layout,
the profile pass's activation peak, memory outside torch, collective buffers, CUDA graphs."""

from .devices import from_label, sm_count
from .kv import Shard
from .lines import Line
from .model import ModelSpec
from .serve import ServeSpec
from .vllm_profile import (
    Batch,
    activation_estimate,
    batch_defaults,
    comm_estimate,
    graph_estimate,
    non_torch_estimate,
)
from .vllm_weights import mxfp4_backend, resident_extra


def profile_batch(engine, serve: ServeSpec) -> Batch:
    """The tokens and sequences vLLM profiles with: the engine's own knobs, else the row's
    defaults for this device and entry point."""
    return batch_defaults(engine.vllm_row, serve.device_bytes, serve.device_label,
                          serve.context_tokens, engine.entrypoint,
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
                                    engine.sampler, sm_count(serve.device_label))
    return Line("runtime_peak", "runtime peak", size, how)


def overhead(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine, pp: int) -> tuple[Line, ...]:
    """non-torch memory, collective buffers and (rows that subtract it) the CUDA-graph
    estimate; a declared value replaces each."""
    row, out = engine.vllm_row, []
    if engine.non_torch_bytes is not None:
        out.append(Line("non_torch", "non-torch memory", engine.non_torch_bytes,
                        "measured: --non-torch", True))
    else:
        out.append(Line("non_torch", "non-torch memory", *non_torch_estimate(row)))
    if engine.comm_buffer_bytes is not None:
        out.append(Line("comm_buffers", "communication buffers", engine.comm_buffer_bytes,
                        "declared: --comm-buffer", True))
    else:
        out.append(Line("comm_buffers", "communication buffers",
                        *comm_estimate(shard.tensor_parallel_size, pp, _interconnect(serve))))
    if engine.enforce_eager:
        out.append(Line("cuda_graphs", "CUDA graph pool", 0, "none: --enforce-eager captures "
                        "no CUDA graphs (vLLM sets cudagraph_mode NONE)"))
    elif engine.cuda_graph_bytes is not None:
        out.append(Line("cuda_graphs", "CUDA graph pool", engine.cuda_graph_bytes,
                        "measured: --cuda-graph-memory", True))
    elif row.graphs_subtracted:
        out.append(Line("cuda_graphs", "CUDA graph pool",
                        *graph_estimate(spec, shard, row, profile_batch(engine, serve))))
    return tuple(out)


def _interconnect(serve: ServeSpec) -> str:
    device = from_label(serve.device_label)
    return device.interconnect if device is not None else ""
