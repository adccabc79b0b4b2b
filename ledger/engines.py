"""Serving engines' KV budgets (vLLM, SGLang, TensorRT-LLM) and the lines outside torch."""

from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field

from .devices import NVLINK
from .errors import SpecError
from .kv_blocks import (
    V0,
    V1,
    blocks_per_request,
    kv_cache_groups,
    kv_cache_tokens,
    max_concurrency,
    num_gpu_blocks,
    uniform_kinds,
)
from .lines import Line
from .lora_rules import slots_in_budget
from .model import ModelSpec
from .serve import DEFAULT_BLOCK_SIZE_TOKENS
from .units import GiB, MiB
from .vllm_batch import SERVE
from .vllm_buffers import rotary_positions
from .vllm_profile import COMM_PER_GPU
from .vllm_versions import NEWEST, TOKENS_FROM_CONCURRENCY, TOKENS_PER_GROUP, VllmRow

PLAIN, VLLM, SGLANG, TRTLLM = "plain", "vllm", "sglang", "trtllm"
ENGINES = (PLAIN, VLLM, SGLANG, TRTLLM)
DEFAULT_GPU_MEMORY_UTILIZATION = NEWEST.default_gpu_memory_utilization  # per release: VllmRow
DEFAULT_FREE_GPU_MEMORY_FRACTION = 0.90  # TensorRT-LLM KvCacheConfig
# SGLang's default mem_fraction_static by tp x pp (server_args.py, 0.4.6): 0.88 on one GPU.
SGLANG_DEFAULT_FRACTIONS = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
DEFAULT_BLOCK_TOKENS = {VLLM: DEFAULT_BLOCK_SIZE_TOKENS, SGLANG: 1, TRTLLM: 32}
# Memory outside torch's allocator that the engine's profiler sees on one GPU (cuBLAS/attention
# workspaces): public vLLM logs show 0.35-0.39 GiB. An estimate; measure it (--non-torch).
DEFAULT_NON_TORCH_BYTES = 384 * MiB


@dataclass(frozen=True)
class EngineSpec:
    """The engine whose budget semantics apply, its knobs (its own flag names), and the lines
    declared from measurement. None means 'the engine's default / servecap's estimate'."""

    name: str = PLAIN
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float | None = None
    max_tokens: int | None = None  # TensorRT-LLM's KvCacheConfig.max_tokens
    max_total_tokens: int | None = None  # SGLang's --max-total-tokens
    non_torch_bytes: int | None = None
    comm_buffer_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    formula: str | None = None
    vllm_row: VllmRow = NEWEST
    asked_release: tuple[int, ...] | None = None  # --engine vllm==X.Y (None: the row's own)
    version_note: str = ""
    entrypoint: str = SERVE
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    mxfp4_backend: str | None = None
    sampler: str | None = None
    native_fp4: bool = False
    notes: tuple[str, ...] = dataclass_field(default_factory=tuple)
    model_runner: str | None = None  # VLLM_USE_V2_MODEL_RUNNER: v1 / v2 (None: the release's)
    pipeline_parallel_size: int = 1  # sets vLLM's concurrent batches (vllm_runner)
    async_scheduling: bool = True  # vLLM's default; off: one batch in flight per stage
    enforce_eager: bool = False  # vLLM --enforce-eager: no CUDA graphs captured or subtracted
    cold_compile: bool = False  # torch.compile compiles in the profiled start (no warm cache)

    def __post_init__(self) -> None:
        if self.name not in ENGINES:
            raise SpecError("--engine", self.name, "allowed: " + ", ".join(ENGINES))
        for field in ("gpu_memory_utilization", "mem_fraction_static",
                      "free_gpu_memory_fraction"):
            value = getattr(self, field)
            if value is not None and not 0 < value <= 1:
                pct = f" (for {value:g}% write {value / 100:g})" if 2 <= value <= 100 else ""
                raise SpecError("--" + field.replace("_", "-"), value, f"a fraction in (0, 1]{pct}")
        if self.formula not in (None, V0, V1):
            raise SpecError("formula", self.formula, "v0 or v1")
        if self.model_runner not in (None, "v1", "v2"):
            raise SpecError("VLLM_USE_V2_MODEL_RUNNER", self.model_runner, "v1 or v2")

    @property
    def kv_formula(self) -> str:
        """vLLM's concurrency formula: the row's engine unless stated (a V0 log on a V1 row)."""
        return self.formula or (self.vllm_row.formula if self.name == VLLM else V1)

    @property
    def release(self) -> tuple[int, ...]:
        """The vLLM release the plan follows: the one asked, or the row's first; never older
        than the row (a release before the first row takes the first row's)."""
        row = self.vllm_row.version + (0,) * (3 - len(self.vllm_row.version))
        asked = self.asked_release
        if asked is None:
            return row
        return max(row, tuple(asked) + (0,) * (3 - len(asked)))

    @property
    def default_utilization(self) -> float:
        return self.vllm_row.default_gpu_memory_utilization


PLAIN_ENGINE = EngineSpec()


def as_cached(spec: ModelSpec, row: VllmRow | None) -> ModelSpec:
    """The model as a vLLM release caches it: an MLA model on a row without MLA (VllmRow.mla
    False: before 0.7.1) runs multi-head attention and caches K and V per head. None (no vLLM
    release): as described."""
    att = spec.attention
    if row is None or row.mla or att.kind != "mla":
        return spec
    return replace(spec, attention=replace(att, mla_per_head_cache=True))


def release_row(engine: EngineSpec) -> VllmRow | None:
    """The vLLM release whose rules a plan's engine follows (None: not vLLM)."""
    return engine.vllm_row if engine.name == VLLM else None


PER_HEAD_REASON = ("no MLA in vLLM before 0.7.1: DeepSeek attention runs as multi-head attention "
                   "on decompressed K and V and caches them per head")


@dataclass(frozen=True)
class Budget:
    """An engine's KV pool on one rank, in its own terms (what its startup log prints)."""

    engine: str
    kv_pool_bytes: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    block_size_tokens: int
    block_bytes: int
    blocks_per_request: int
    how: str
    num_groups: int = 1
    kinds: tuple[str, ...] = ()  # vLLM's KV cache groups, one kind each ("full", "state", ...)
    tokens_rule: str = TOKENS_PER_GROUP  # how the release prints 'GPU KV cache size' (VllmRow)


@dataclass(frozen=True)
class KVGeometry:
    """What sizes a rank's pages: bytes one token takes in one layer on this rank, its layers."""

    spec: ModelSpec
    layer_bytes_per_token: int
    layer_ids: tuple[int, ...]
    max_model_len: int
    max_num_batched_tokens: int
    block_size_tokens: int
    kv_bits: int = 16
    tensor_parallel_size: int = 1
    mamba_cache_mode: str = "align"
    checkpoint_alignment: int = 0  # gated-DeltaNet prefill checkpoints (VllmRow, 0.33)
    all_chunk_aligned: bool = True  # 'all' mode aligns to the Mamba chunk (VllmRow, to 0.31)


def comm_buffer_estimate(tp: int, pp: int, link: str = NVLINK) -> tuple[int, str]:
    """NCCL and custom all-reduce buffers per GPU: 0 on one GPU; tensor parallelism over NVLink
    1.5 GiB + 256 MiB x (tp - 1) (calibrated on vLLM PR 10511's H100 log, non_torch 1.79 ->
    3.58 GiB from TP 1 to TP 2), over PCIe, without P2P or across nodes COMM_PER_GPU (SGLang's
    'Init torch distributed ends. mem usage=0.13 GB' on 4 x L4, llms-in-clouds docs/sglang.md);
    plus 256 MiB for pipeline send/recv when pp > 1. An estimate (ledger/devices.py tp_link)."""
    if tp == 1 and pp == 1:
        return 0, "none: one GPU, no collectives"
    tensor = 0 if tp == 1 else (3 * GiB // 2 + 256 * MiB * (tp - 1) if link == NVLINK
                                else COMM_PER_GPU)
    size = tensor + (256 * MiB if pp > 1 else 0)
    over = f" over {link}" if tp > 1 else ""
    return size, (f"estimate for tp={tp}, pp={pp}{over}: NCCL + all-reduce buffers; "
                  "declare with --comm-buffer")


def overhead_lines(engine: EngineSpec, tp: int, pp: int, link: str = NVLINK) -> tuple[Line, ...]:
    """non-torch memory and communication buffers of SGLang, TensorRT-LLM and plain multi-GPU
    plans (vLLM's come from its release's rules: vllm_lines), and whatever was declared; the
    plain single-GPU ledger stays the seed's."""
    out = []
    if engine.non_torch_bytes is not None:
        out.append(Line("non_torch", "non-torch memory", engine.non_torch_bytes,
                        "measured: --non-torch", True))
    elif engine.name != PLAIN:
        out.append(Line("non_torch", "non-torch memory", DEFAULT_NON_TORCH_BYTES,
                        "estimate: cuBLAS/attention workspaces outside torch; measure to replace"))
    if engine.comm_buffer_bytes is not None:
        out.append(Line("comm_buffers", "communication buffers", engine.comm_buffer_bytes,
                        "declared: --comm-buffer", True))
    elif engine.name != PLAIN or tp * pp > 1:
        size, how = comm_buffer_estimate(tp, pp, link)
        out.append(Line("comm_buffers", "communication buffers", size, how))
    if engine.cuda_graph_bytes is not None:
        out.append(Line("cuda_graphs", "CUDA graph pool", engine.cuda_graph_bytes,
                        "measured: --cuda-graph-memory", True))
    return tuple(out)


def rotary_cache_line(spec: ModelSpec, row: VllmRow | None = None) -> Line:
    """vLLM's rotary embedding keeps one cos/sin cache per model, positions x rotary dim in the
    model dtype (2 B), and measures it with the weights: 32 MiB for Llama-3.1-8B, the +0.03
    GiB its logs show over the checkpoint. Where only part of a head rotates, the rotated
    dims (get_rope's rotary_dim: head_dim x partial_rotary_factor). M-RoPE's cache holds
    more positions on the releases that enlarge it (ledger/vllm_buffers.py
    rotary_positions)."""
    att = spec.attention
    rotary = att.qk_rope_head_dim if att.kind == "mla" else att.rotary_dim or att.head_dim
    positions, why = rotary_positions(spec, row)
    size = positions * rotary * 2
    return Line("rotary_cache", "rotary cos/sin cache", size,
                f"vLLM: {positions:,} positions{why} x {rotary} x 2 B, one per "
                "model, logged with the weights")


def pool_and_headroom(engine: EngineSpec, device_bytes: int, lines: tuple[Line, ...],
                      world_size: int) -> tuple[int, int, str, str]:
    """(KV pool, headroom outside the engine's budget, how the pool was sized, headroom's 'from').

    vLLM: pool = total x gpu_memory_utilization - weights - activation peak - non-torch; NCCL
    and CUDA context sit in the 1 - utilization headroom. SGLang: pool = free at start x
    mem_fraction_static - weights, free at start = total - non-torch - comm. TensorRT-LLM:
    pool = free_gpu_memory_fraction x memory free after weights, activations and buffers."""
    amount = {line.key: line.num_bytes for line in lines}
    weights = amount["weights"] + amount["weight_metadata"]
    act, non_torch, comm = amount["runtime_peak"], amount["non_torch"], amount["comm_buffers"]
    lora = amount.get("lora_adapters", 0)
    # vLLM profiles the encoder with its cache held: both sit in the profiled peak
    act += amount.get("encoder_cache", 0) + amount.get("encoder_profile", 0)
    weights += amount.get("rotary_cache", 0) + amount.get("encoder_weights", 0) \
        + amount.get("weights_resident", 0) + lora + amount.get("eplb", 0)
    if engine.name == VLLM:
        outside = 0 if slots_in_budget(engine.vllm_row) else lora
        return _vllm(engine, device_bytes, weights - outside + act + non_torch + comm
                     + amount.get("cuda_graphs", 0), "cuda_graphs" in amount, outside)
    graphs = amount.get("cuda_graphs", 0)
    if engine.name == SGLANG:
        return _sglang(engine, device_bytes - non_torch - comm, weights, act + graphs, world_size)
    return _trtllm(engine, device_bytes - weights - act - non_torch - comm - graphs)


def _sglang(engine: EngineSpec, free_start: int, weights: int, act: int, world_size: int):
    fraction = engine.mem_fraction_static or _sglang_default(world_size)
    pool = int(free_start * fraction) - weights
    cap = (f", at most max_total_tokens {engine.max_total_tokens:,} (whole pages)"
           if engine.max_total_tokens is not None else "")
    default = "" if engine.mem_fraction_static else f" (its default at tp x pp = {world_size})"
    return pool, free_start - int(free_start * fraction) - act, (
        f"SGLang: (total - non-torch - comm) x mem_fraction_static {fraction:.2f}{default} - "
        f"weights{cap}"
    ), f"outside mem_fraction_static {fraction:.2f}, after activations"


def _trtllm(engine: EngineSpec, free_after: int):
    fraction = engine.free_gpu_memory_fraction or DEFAULT_FREE_GPU_MEMORY_FRACTION
    pool = int(free_after * fraction)
    cap = (f", at most max_tokens {engine.max_tokens:,} (whole blocks)"
           if engine.max_tokens is not None else "")
    default = "" if engine.free_gpu_memory_fraction else " (its default)"
    return pool, free_after - pool, (
        f"TensorRT-LLM: free_gpu_memory_fraction {fraction:.2f}{default} x memory free after "
        f"weights{cap}"
    ), f"the {1 - fraction:.0%} of free memory TensorRT-LLM leaves"


def _vllm(engine: EngineSpec, device_bytes: int, non_kv: int, graphs: bool, outside: int = 0):
    """requested = total x gpu_memory_utilization; pool = requested - everything the profile
    counted (weights, activation peak, non-torch incl. collective buffers, and the CUDA-graph
    line where the release subtracts it or it was measured: vllm_runner.graphs_subtracted).
    The headroom is the rest, less what the profile missed and the device still holds
    (`outside`: LoRA slots on V0's memory_profiling rows, lora_rules.slots_in_budget)."""
    row = engine.vllm_row
    missed = f", less the LoRA slots {row.name} leaves out of its profile" if outside else ""
    if engine.kv_cache_memory_bytes is not None:
        rest = device_bytes - non_kv - outside - engine.kv_cache_memory_bytes
        return engine.kv_cache_memory_bytes, rest, "measured: --kv-cache-memory (ignores " \
            "gpu_memory_utilization)", "left on the device outside the declared pool" + missed
    util = engine.gpu_memory_utilization or row.default_gpu_memory_utilization
    requested = device_bytes * util
    pool = int(requested - non_kv)
    default = "" if engine.gpu_memory_utilization else " (its default)"
    return pool, device_bytes - int(requested) - outside, (
        f"{row.name} ({row.tag}): total x gpu_memory_utilization {util:.2f}{default} - weights - "
        "activation peak - non-torch - comm" + (" - CUDA graphs" if graphs else "")
        + (" (the LoRA slots not subtracted: outside its profile)" if outside else "")
    ), f"outside gpu_memory_utilization {util:.2f}{missed}"


def _sglang_default(world_size: int) -> float:
    return next(f for size, f in SGLANG_DEFAULT_FRACTIONS if world_size >= size)


def budget(engine: EngineSpec, pool_bytes: int, geo: KVGeometry, how: str) -> Budget:
    """Blocks, cache tokens and max concurrency of one rank's pool, as the engine computes them."""
    spec, bsz = geo.spec, geo.block_size_tokens
    if engine.name == VLLM and spec.is_hybrid:
        return _hybrid_budget(engine, pool_bytes, geo, how)
    if engine.name == VLLM:
        groups = kv_cache_groups(uniform_kinds(spec.attention.layer_kinds, spec.num_layers))
        size = groups.group_size_on(geo.layer_ids)
        page = bsz * geo.layer_bytes_per_token
        blocks = num_gpu_blocks(pool_bytes, page, size)
        per_request = blocks_per_request(groups.kinds, geo.max_model_len, bsz,
                                         spec.attention.sliding_window_tokens,
                                         geo.max_num_batched_tokens)
        concurrency = max_concurrency(blocks, per_request, geo.max_model_len, bsz,
                                      engine.kv_formula)
        tokens = logged_tokens(engine, blocks, len(groups.kinds), bsz, concurrency,
                               geo.max_model_len)
        return Budget(engine.name, pool_bytes, blocks, tokens, concurrency, bsz, page * size,
                      per_request, how, len(groups.kinds), tuple(groups.kinds),
                      engine.vllm_row.tokens_rule)
    block_bytes = bsz * _token_bytes(geo)
    blocks = max(pool_bytes, 0) // block_bytes if block_bytes else 0
    if engine.name == TRTLLM and engine.max_tokens is not None:
        # KvCacheConfig.max_tokens caps the blocks at ceil(max_tokens / tokens_per_block): with
        # free_gpu_memory_fraction 'the smaller value will be used' (the engine's warning)
        blocks = min(blocks, -(-engine.max_tokens // bsz))
    if engine.name == SGLANG and engine.max_total_tokens is not None:
        # --max-total-tokens: min(profiled, max_total_tokens), then whole pages
        # (model_runner.py init_memory_pool, sglang 0.4.4)
        blocks = min(blocks, engine.max_total_tokens // bsz)
    per_request = -(-geo.max_model_len // bsz)
    return Budget(engine.name, pool_bytes, blocks, blocks * bsz,
                  blocks * bsz / geo.max_model_len, bsz, block_bytes, per_request, how)


def _token_bytes(geo: KVGeometry) -> int:
    """One token's KV over the layers this rank holds: each layer by its own shape, none for a
    layer that caches nothing (a no-op block, a KV-sharing layer: ledger.kv)."""
    if not geo.spec.layer_shapes:
        return geo.layer_bytes_per_token * len(geo.layer_ids)
    from .kv import Shard, kv_bytes_per_token

    return kv_bytes_per_token(geo.spec, geo.kv_bits,
                              Shard(geo.tensor_parallel_size, tuple(geo.layer_ids)))


def _hybrid_budget(engine: EngineSpec, pool_bytes: int, geo: KVGeometry, how: str) -> Budget:
    """States, chunked-local layers, an indexer or per-layer shapes: ledger/hybrid.py's layout.
    'GPU KV cache size' as the release prints it (logged_tokens)."""
    from .hybrid import layout

    plan = layout(geo.spec, geo.kv_bits, geo.layer_ids, geo.tensor_parallel_size,
                  geo.max_model_len, geo.max_num_batched_tokens, geo.block_size_tokens,
                  geo.mamba_cache_mode, geo.checkpoint_alignment, geo.all_chunk_aligned)
    blocks = plan.num_gpu_blocks(pool_bytes)
    concurrency = plan.max_concurrency(blocks)
    tokens = logged_tokens(engine, blocks, len(plan.kinds), plan.block_size_tokens, concurrency,
                           geo.max_model_len)
    return Budget(engine.name, pool_bytes, blocks, tokens, concurrency, plan.block_size_tokens,
                  plan.page_bytes * plan.group_size, plan.pages_per_request, how,
                  len(plan.kinds), plan.kinds, engine.vllm_row.tokens_rule)


def logged_tokens(engine: EngineSpec, blocks: int, groups: int, block_size: int,
                  concurrency: float, max_model_len: int) -> int:
    """'GPU KV cache size: N tokens' as the release prints it (VllmRow.tokens_rule)."""
    return _printed_tokens(engine.vllm_row.tokens_rule, blocks, groups, block_size,
                           concurrency, max_model_len)


def _printed_tokens(rule: str, blocks: int, groups: int, block_size: int, concurrency: float,
                    max_model_len: int) -> int:
    if rule == TOKENS_FROM_CONCURRENCY:  # a float product, truncated, as vLLM computes it
        return int(concurrency * max_model_len)
    return kv_cache_tokens(blocks, groups, block_size)


def blocks_for_logged_tokens(result: Budget, tokens: int, max_model_len: int) -> int:
    """logged_tokens read back: the fewest blocks that print `tokens` by the release's rule
    (VllmRow.tokens_rule), result being the plan's budget at max_model_len."""
    if result.tokens_rule != TOKENS_FROM_CONCURRENCY:
        return tokens // result.block_size_tokens * result.num_groups

    def printed(blocks: int) -> int:
        return _printed_tokens(result.tokens_rule, blocks, result.num_groups,
                               result.block_size_tokens,
                               max_concurrency(blocks, result.blocks_per_request,
                                               max_model_len, result.block_size_tokens),
                               max_model_len)

    # the exact quotient's answer; vLLM's float division can print one fewer token there
    # (int(400,000 / 191 x 191) = 399,999), so step to where the float product prints it
    found = -(-tokens * result.blocks_per_request // max_model_len)
    while printed(found) < tokens:
        found += 1
    while found > 0 and printed(found - 1) >= tokens:
        found -= 1
    return found


def starts(result: Budget, max_model_len: int) -> bool:
    """vLLM refuses to start when its pool is not positive or cannot hold one max_model_len
    request: V1's check_enough_kv_cache_memory (blocks one request reserves), V0's 'max seq
    len ... larger than the maximum number of tokens that can be stored in KV cache'."""
    if result.engine != VLLM:
        return True
    return result.kv_pool_bytes > 0 and result.num_gpu_blocks >= max(result.blocks_per_request,
                                                                        1)


def with_blocks(result: Budget, num_blocks: int, max_model_len: int,
                engine: EngineSpec) -> Budget:
    """The same budget held to `num_blocks` (vLLM gives every rank the smallest rank's count)."""
    tokens = kv_cache_tokens(num_blocks, result.num_groups, result.block_size_tokens)
    if result.engine == VLLM:
        concurrency = max_concurrency(num_blocks, result.blocks_per_request, max_model_len,
                                      result.block_size_tokens, engine.kv_formula)
        tokens = logged_tokens(engine, num_blocks, result.num_groups,
                               result.block_size_tokens, concurrency, max_model_len)
    else:
        concurrency = tokens / max_model_len
    return replace(result, num_gpu_blocks=num_blocks, kv_cache_tokens=tokens,
                   max_concurrency=concurrency)
