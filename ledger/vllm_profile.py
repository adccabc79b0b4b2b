"""What vLLM's start-up profile subtracts besides weights, estimated from the config: the
activation peak of its dummy forward and sampler pass, memory outside torch, collective
buffers and (vLLM >= 0.20) its CUDA-graph estimate. Each term is an estimate, labelled."""


from . import dtypes
from .devices import NVLINK
from .kv import Shard
from .model import ModelSpec
from .sharding import vocab_rows_per_rank
from .units import GiB, MiB
from .vllm_batch import Batch
from .vllm_row import (
    CONSUMED,
    FLASHINFER,
    FULL_SORT_SAMPLER_BYTES,
    GRAPH_MAX_TOKENS,
    MRV2,
    PROFILED,
    SEGMENTED_SORT_MIN_ROWS,
    TORCH,
    TRITON,
    V1_TORCH_SAMPLER_BYTES,
    VllmRow,
)

# Memory outside torch's allocator that the profile counts on one GPU: cuBLAS and attention
# workspaces, loaded kernels; with the CUDA context where the row measures device-wide use.
# Public logs: 0.16-0.25 GiB profiled (vllm PR 12126, issues 13061, 14447), 0.35 GiB with the
# context (issue 10517, 0.6.4). Estimates; the log's figure replaces them in reconcile.
NON_TORCH_PROFILED = 256 * MiB
NON_TORCH_WITH_CONTEXT = 384 * MiB
INT32_BYTES = 4
# NCCL + custom all-reduce buffers per GPU when tp x pp > 1 over PCIe, where the release
# profiles them (its baseline precedes the process groups: VllmRow.communicators_before_baseline)
COMM_PER_GPU = 128 * MiB
# Over NVLink/NVSwitch (H100/H200/B200 SXM) a communicator takes far more: the profile's
# non-torch increase is 0.24-0.27 GiB at TP 1 and 2.06-2.21 GiB at TP 2 and 4 in vLLM 0.19.0's
# H100 logs (llm-d-planner sweep; 1.79 -> 3.58 GiB from TP 1 to 2 in vllm PR 10511's H100 log),
# against 0.30 GiB at TP 2 over PCIe (vllm issue 15815, 2x L40S). After 0.11's snapshot that
# increase is torch's own communicator, which 0.11-0.25 form lazily at the profile's logits
# all-gather on the device group, with the connections NCCL makes at a collective's first use
# (NCCL_RUNTIME_CONNECT, on from NCCL 2.22): docs/reconcile.md, "What the collectives hold after
# the baseline" (bench/comm_logs.py). An estimate; the log's figure replaces it in reconcile.
COMM_PER_GPU_NVLINK = 1_856 * MiB
GRAPH_OVERHEAD = 6 * MiB  # per captured graph beyond the first (LMCache issue 3430's 0.52 GiB)
FUSED_MOE_CHUNK = 32_768  # fused_moe processes at most this many tokens at once
# FlashInfer's top-k/top-p sampling from logits (vllm/v1/sample/ops/topk_topp_sampler.py
# flashinfer_sample): the bf16 logits, their fp32 copy and the fp32 probabilities it writes.
FLASHINFER_SAMPLER_BYTES = 2 + 4 + 4
# Triton's top-k/top-p masks the fp32 logits in place; then softmax's fp32 probabilities and
# random_sample's exponential noise q (probs.div_(q)): model-dtype logits, fp32 copy, probs, q.
TRITON_SAMPLER_BYTES = 2 + 4 + 4 + 4
TRITON_MIN_BATCH = 8  # apply_top_k_top_p: Triton for batches of 8 or more, else PyTorch's sort
SAMPLERS = (FLASHINFER, TORCH, TRITON)
# PyTorch's cuBLAS workspace, one per (handle, stream), taken from the caching allocator at the
# first cuBLAS call (pytorch/pytorch aten/src/ATen/cuda/CublasHandlePool.cpp@26a39059ec58
# setWorkspaceForHandle -> getNewWorkspace: CUDACachingAllocator allocate; parseChosenWorkspace-
# Size: ':4096:2:16:8 default, 32MiB for Hopper', i.e. 4096 x 8 KiB on SM 9.0, else
# 4096 KiB x 2 + 16 KiB x 8). vLLM's weight loading runs no GEMM, so the profile pass's first
# matmul allocates it and torch's peak counts it (vllm/utils/mem_utils.py memory_profiling at
# v0.19.0: torch_peak_increase). cuBLASLt's own 1 MiB (CUBLASLT_WORKSPACE_SIZE) is left out.
CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024
CUBLAS_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8
HOPPER = (9, 0)


def forward_peak(spec: ModelSpec, shard: Shard, tokens: int) -> int:
    """The widest layer of the dummy forward on this rank, T tokens held at once: hidden,
    residual and output (3 H) with, in an MLP, gate_up (2 I), the activation (I); in a fused
    MoE, per routed copy the intermediate caches (2 I, I, H); in attention q, k, v, its output
    and o_proj's (2 q + 2 kv + H). Activation dtype bytes per element."""
    act = act_bytes(spec)
    tp, h, att = shard.tensor_parallel_size, spec.hidden_size, spec.attention
    widths = [2 * (att.num_heads * att.head_dim) // tp + 2 * max(
        att.num_kv_heads * att.head_dim // tp, att.head_dim) + h]
    if spec.moe is None or len(spec.moe.dense_layers) == spec.num_layers:
        widths.append(3 * spec.intermediate_size // tp)
    if spec.moe is not None:
        moe = spec.moe
        per_copy = 3 * -(-moe.expert_intermediate_size // tp) + h
        moe_tokens = min(tokens, FUSED_MOE_CHUNK)
        widths.append(moe.num_experts_per_tok * per_copy * moe_tokens // tokens)
        if moe.dense_layers:
            widths.append(3 * spec.intermediate_size // tp)
    return tokens * (3 * h + max(widths)) * act


def sampler_path(row: VllmRow, sampler: str | None, seqs: int | None = None) -> str:
    """The path a log (or --sampler) states, else the release's default (VllmRow.sampler); on
    the Triton path a batch below VllmRow.triton_min_batch is sorted by PyTorch instead
    (apply_top_k_top_p: 'Use pytorch sort implementation for small batch sizes',
    vllm/v1/sample/ops/topk_topp_sampler.py at v0.19.0)."""
    path = sampler if sampler is not None else row.sampler
    if path == TRITON and seqs is not None and seqs < row.triton_min_batch:
        return TORCH
    return path


def torch_sort_bytes(row: VllmRow, seqs: int) -> int:
    """Bytes a (request x vocabulary) element takes on PyTorch's path: the row's figure, or the
    sort's own where it is larger: V1_TORCH_SAMPLER_BYTES for one row or SEGMENTED_SORT_MIN_ROWS
    and more, FULL_SORT_SAMPLER_BYTES for 2 to 127 rows (ledger/vllm_row.py)."""
    sort = FULL_SORT_SAMPLER_BYTES if 1 < seqs < SEGMENTED_SORT_MIN_ROWS \
        else V1_TORCH_SAMPLER_BYTES
    return max(row.sampler_bytes_per_logit, sort)


def sampler_peak(spec: ModelSpec, row: VllmRow, seqs: int, sampler: str | None = None,
                 sms: int | None = None) -> int:
    """The dummy sampler over `seqs` rows of the full vocabulary (logits are gathered from the
    tensor-parallel ranks): FLASHINFER_SAMPLER_BYTES, Model Runner V2's (VllmRow
    .mrv2_sampler_bytes) or PyTorch's sort (torch_sort_bytes) each; Triton's path also keeps
    its per-program buffer (triton_buffer)."""
    path = sampler_path(row, sampler, seqs)
    per = {FLASHINFER: FLASHINFER_SAMPLER_BYTES, TRITON: TRITON_SAMPLER_BYTES,
           MRV2: row.mrv2_sampler_bytes}.get(path) if path != TORCH else None
    per = torch_sort_bytes(row, seqs) if per is None else per
    extra = triton_buffer(spec, seqs, sms, row.triton_min_batch) if path == TRITON else 0
    return seqs * spec.vocab_size * per + extra


def triton_buffer(spec: ModelSpec, seqs: int, sms: int | None,
                  min_batch: int = TRITON_MIN_BATCH) -> int:
    """apply_top_k_top_p_triton (vllm/v1/sample/ops/topk_topp_triton.py, from 0.17.1) for
    batches of min_batch or more (VllmRow.triton_min_batch: 8, every batch from 0.30): one fp32
    vocabulary row per program, min(SMs, batch) programs, the buffer min(next power of 2, SMs)
    rows, cached once made (so held after the profile). Unknown SM count (a device outside the
    catalog's SM_COUNTS): 0."""
    if sms is None or seqs < min_batch:
        return 0
    programs = min(sms, seqs)
    return min(1 << (programs - 1).bit_length(), sms) * spec.vocab_size * 4


def moe_workspace(spec: ModelSpec, shard: Shard, tokens: int) -> int:
    """The fused-MoE workspaces vLLM keeps once allocated (WorkspaceManager, from 0.13):
    workspace1 (M, topk, max(I, H)) and workspace2 (M, topk, max(2 I, H)) in the activation
    dtype, M = min(tokens, the fused-MoE chunk) (TritonExperts.workspace_shapes)."""
    if spec.moe is None or len(spec.moe.dense_layers) == spec.num_layers:
        return 0
    inter, h = -(-spec.moe.expert_intermediate_size // shard.tensor_parallel_size), spec.hidden_size
    rows = min(tokens, FUSED_MOE_CHUNK) * spec.moe.num_experts_per_tok
    return rows * (max(inter, h) + max(2 * inter, h)) * act_bytes(spec)


def act_bytes(spec: ModelSpec) -> int:
    return dtypes.lookup("bf16" if spec.checkpoint_dtype not in ("fp16", "fp32")
                         else spec.checkpoint_dtype, "dtype").bits // 8


def cublas_workspace(capability: tuple[int, int] | None) -> tuple[int, str]:
    """PyTorch's default cuBLAS workspace on this GPU (CUBLAS_WORKSPACE_SM90 on SM 9.0, else
    CUBLAS_WORKSPACE), and what it was read from; a device of unknown compute capability is
    given the non-Hopper default, and the text says so."""
    if capability == HOPPER:
        return CUBLAS_WORKSPACE_SM90, "cuBLAS workspace 32 MiB (SM 9.0)"
    known = f"SM {capability[0]}.{capability[1]}" if capability else "compute capability unknown"
    return CUBLAS_WORKSPACE, f"cuBLAS workspace 8.1 MiB ({known})"


def sampler_inputs(spec: ModelSpec, seqs: int, row: VllmRow) -> int:
    """What the V1 runner's dummy sampler pass holds besides the logits: _dummy_run's gather
    hidden_states[logit_indices] (kept by profile_run) and, from 0.9.0, _dummy_sampler_run's
    torch.rand_like of it, seqs x hidden each (VllmRow.sampler_input_copies;
    vllm/v1/worker/gpu_model_runner.py read at v0.8.0, v0.8.5, v0.9.0, v0.9.1, v0.9.2,
    v0.10.2, v0.12.0, v0.15.0, v0.19.0, v0.22.0, v0.25.0, v0.33.0)."""
    return row.sampler_input_copies * seqs * spec.hidden_size * act_bytes(spec)


def compile_benchmark_peak(spec: ModelSpec, shard: Shard, tokens: int) -> int:
    """What a cold torch.compile holds at its peak inside vLLM's profile (vllm#54122: the
    first dummy forward compiles inside memory_profiling(), so the compile's allocator peak is
    charged as activation). From 0.11.1 vLLM's default inductor_compile_config sets
    combo_kernels and benchmark_combo_kernel (vllm/config/compilation.py __post_init__ at
    v0.11.1 through v0.33.0, on torch >= 2.9), and Inductor benchmarks each candidate kernel on
    random tensors the size of every one of its buffer arguments (torch/_inductor/codegen/
    triton.py codegen_kernel_benchmark get_args: rand_strided per argument; benchmark_fused_nodes
    and benchmark_combo_kernel call mod.get_args(); runtime/triton_heuristics.py clone_args
    then copies only the mutated ones). The text model's forward starts with the embedding
    gather inside the compiled graph (the runner passes input_ids), whose kernel reads the whole
    table, so its benchmark holds a random copy of this rank's table (the vocabulary padded to
    64 and split over tp, as the weights' sharding.vocab_rows_per_rank; first pipeline stage
    only) beside its tokens x hidden output."""
    if not shard.first_stage:
        return 0
    rows = vocab_rows_per_rank(spec.vocab_size, shard.tensor_parallel_size)
    return (rows + tokens) * spec.hidden_size * act_bytes(spec)


def activation_estimate(spec: ModelSpec, shard: Shard, row: VllmRow, batch: Batch,
                        sampler_kind: str | None = None, sms: int | None = None,
                        capability: tuple[int, int] | None = None,
                        cold_compile: bool = False) -> tuple[int, str]:
    """Torch peak increase of vLLM's profile run: the forward and the sampler run one after
    the other, so the wider of the two; only the last pipeline stage samples. V1 samples from
    the dummy batch's hidden states (tokens x hidden), held meanwhile where the release keeps
    them (VllmRow.profile_keeps_hidden), with the V1 runner's sampler inputs (sampler_inputs),
    and where the release keeps the fused-MoE workspaces
    (VllmRow.moe_workspace_kept), so are they. PyTorch's cuBLAS workspace (cublas_workspace),
    allocated by the pass's first matmul, is held under both. A cold start (cold_compile) on a
    release whose compile benchmarks kernels (VllmRow.compile_benchmarks_kernels) compiles
    before the pass runs, so its peak is the wider of the pass and compile_benchmark_peak."""
    seqs = min(batch.seqs, batch.tokens)
    forward = forward_peak(spec, shard, batch.tokens)
    sampler = sampler_peak(spec, row, seqs, sampler_kind, sms) if shard.last_stage else 0
    kept = moe_workspace(spec, shard, batch.tokens) if row.moe_workspace_kept else 0
    if row.formula == "v1" and shard.last_stage:  # _dummy_run's hidden states feed the sampler
        if row.profile_keeps_hidden:
            kept += batch.tokens * spec.hidden_size * act_bytes(spec)
        if sampler_kind != MRV2:
            kept += sampler_inputs(spec, seqs, row)
    workspace, workspace_how = cublas_workspace(capability)
    wider = "forward" if forward >= sampler + kept else "sampler"
    also = f" + what the forward still holds {kept / GiB:.2f} GiB" if kept else ""
    run = max(forward, sampler + kept) + workspace
    path = sampler_path(row, sampler_kind, seqs)
    how = (f"estimate of vLLM's profile run ({row.name}): max(forward of {batch.tokens:,} tokens "
           f"{forward / GiB:.2f} GiB, {path} sampler of {seqs:,} x "
           f"{spec.vocab_size:,} logits {sampler / GiB:.2f} GiB{also}) = the {wider}, + "
           f"{workspace_how} ({batch.how})")
    if not (cold_compile and row.compile_benchmarks_kernels):
        return run, how + "; measure to replace"
    compiled = compile_benchmark_peak(spec, shard, batch.tokens)
    larger = "the compile" if compiled > run else "the run"
    return max(run, compiled), (
        f"{how}; a cold torch.compile first (--cold-compile): Inductor benchmarks the embedding "
        f"gather on a random copy of the table and its output, {compiled / GiB:.2f} GiB; the "
        f"larger, {larger}; measure to replace")


def penalties_state(spec: ModelSpec, seqs: int) -> int:
    """Model Runner V2's penalties state, made with its sampler on the last pipeline stage
    once the weights are loaded (after 'Model loading took') and held for good:
    output_bin_counts (max_num_reqs x vocab int32) and prompt_bin_mask (max_num_reqs x
    ceil(vocab / 32) int32) (vllm/v1/worker/gpu/sample/penalties.py PenaltiesState, read at
    v0.15.0, v0.19.0, v0.22.0, v0.26.0, v0.27.1, v0.28.0, v0.33.0; the TODO there: 'can be very
    large, taking up GBs of GPU memory')."""
    return seqs * (spec.vocab_size + -(-spec.vocab_size // 32)) * INT32_BYTES


def non_torch_estimate(row: VllmRow, penalties: int = 0) -> tuple[int, str]:
    """What the profile counts outside weights and activations. A CONSUMED row (the free-memory
    drop since the init snapshot, from 0.27) also counts the torch buffers the runner made
    after loading and keeps: Model Runner V2's penalties state (`penalties`, penalties_state;
    0 on the V1 runner and on a stage without the sampler). A PROFILED row counts only the
    torch peak's increase during the pass, which those buffers precede."""
    if row.profile == CONSUMED and penalties:
        return NON_TORCH_PROFILED + penalties, (
            f"estimate ({row.name}): cuBLAS/attention workspaces outside torch since the "
            f"baseline, {NON_TORCH_PROFILED / GiB:.2f} GiB, + Model Runner V2's penalties state "
            f"{penalties / GiB:.2f} GiB (max_num_seqs x vocabulary x int32 and its prompt mask, "
            "made after loading and counted by the free-memory drop); measure to replace")
    if row.profile in (PROFILED, CONSUMED):
        return NON_TORCH_PROFILED, (f"estimate ({row.name}): cuBLAS/attention workspaces "
                                    "outside torch since the baseline; measure to replace")
    return NON_TORCH_WITH_CONTEXT, (f"estimate ({row.name}): the CUDA context and workspaces "
                                    "outside torch (this release counts device-wide use)")


def comm_estimate(tp: int, pp: int, link: str = "", why: str = "",
                  before_baseline: bool = False) -> tuple[int, str]:
    """Collective buffers vLLM's profile counts with non-torch memory, inside the
    gpu_memory_utilization budget. Tensor parallelism over NVLink (ledger/devices.py tp_link)
    takes COMM_PER_GPU_NVLINK, what the profile counted on vLLM 0.19's H100 logs, whose
    communicators were already built before the baseline (the profile builds torch's own, for
    the logits all-gather, up to 0.25; from 0.26 that goes through PyNccl and the term is an
    overestimate no log sizes). Over PCIe, without P2P, across nodes
    or between pipeline stages: COMM_PER_GPU where the release builds its communicators after
    its baseline; none where it builds them before (before_baseline:
    VllmRow.communicators_before_baseline), as those buffers then lie outside the budget and no
    later collective is known to add device memory there (NCCL stages a group without P2P
    through host memory: its SHM transport)."""
    if tp * pp == 1:
        return 0, "none: one GPU, no collectives"
    over = f" over {link}" + (f" ({why})" if why else "") if link else ""
    if link != NVLINK and before_baseline:
        return 0, (f"none inside vLLM's budget for tp={tp}, pp={pp}{over}: this release builds "
                   "NCCL's communicators and the all-reduce buffers before its memory baseline "
                   "(vllm/v1/worker/gpu_worker.py init_device, from v0.11.0), outside "
                   "gpu_memory_utilization; an estimate, the log's non-torch figure replaces it")
    size = COMM_PER_GPU_NVLINK if link == NVLINK else COMM_PER_GPU
    return size, (f"estimate for tp={tp}, pp={pp}{over}: NCCL + all-reduce buffers, inside "
                  "vLLM's budget (allocated after its baseline)")


def capture_sizes(max_num_seqs: int, limit: int = GRAPH_MAX_TOKENS) -> tuple[int, int, int]:
    """(piecewise graphs, full decode graphs, largest piecewise size) for vLLM's default
    capture list: 1, 2, 4, then every 8 to 256 and every 16 beyond, up to min(2 x
    max_num_seqs, limit) (vllm/config/compilation.py; limit 512, 1,024 on SM 10.x from 0.28:
    VllmRow.graph_max_sm100); full graphs up to max_num_seqs."""
    largest = min(2 * max_num_seqs, limit)

    def count(limit: int) -> int:
        sizes = [s for s in (1, 2, 4) if s <= limit]
        sizes += [s for s in range(8, 256, 8) if s <= limit]
        sizes += [s for s in range(256, limit + 1, 16)]
        return len(sizes)
    return count(largest), count(min(max_num_seqs, largest)), largest


def graph_estimate(spec: ModelSpec, shard: Shard, row: VllmRow, batch: Batch,
                   limit: int = GRAPH_MAX_TOKENS) -> tuple[int, str]:
    """vLLM's profile_cudagraph_memory(): the first capture (the activations of the largest
    size) plus a per-graph overhead for the rest; GRAPH_OVERHEAD is an estimate."""
    piecewise, full, largest = capture_sizes(batch.seqs, limit)
    size = forward_peak(spec, shard, largest) + (piecewise + full - 2) * GRAPH_OVERHEAD
    return size, (f"estimate of vLLM's CUDA-graph profile ({row.name} subtracts it): "
                  f"{piecewise} piecewise + {full} full graphs, largest {largest} tokens; "
                  "the log's 'Estimated CUDA graph memory' replaces it")
