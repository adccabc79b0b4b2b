"""build_plan: the per-device memory ledger and the memory-only concurrency ceiling."""

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from . import dtypes
from .arch import active_parameters
from .devices import NVLINK, tp_link
from .encoder import EncoderBudget
from .encoders import encoder_line
from .engines import (
    PER_HEAD_REASON,
    PLAIN,
    PLAIN_ENGINE,
    VLLM,
    Budget,
    EngineSpec,
    KVGeometry,
    as_cached,
    budget,
    overhead_lines,
    pool_and_headroom,
    release_row,
    rotary_cache_line,
    starts,
)
from .eplb import eplb_lines
from .kv import (
    WHOLE,
    Shard,
    indexer_bytes_per_token,
    kv_bits_per_token_layer,
    kv_bytes_by_layer_kind,
    kv_bytes_per_request,
    kv_bytes_per_token,
)
from .kv_offload import OffloadTier, offload_lines, offload_tier
from .lines import Line
from .lora import lora_lines
from .model import ModelSpec
from .paging import BlockReport, paging_report
from .plan_encoder import encoder_plan, encoder_profile
from .plan_kv import extra_cache_lines, indexer_request, kv_from, kv_in_use_by_kind, window_from
from .plan_notes import after_notes, cache_form_notes, engine_notes, plan_notes
from .plan_weights import (
    NO_OVERRIDES,
    Overrides,
    metadata_from,
    rank_weights,
    representations,
    weight_format,
)
from .runtime_estimate import estimate_runtime_peak
from .serve import DEFAULT_SAFETY_FRACTION, ServeSpec
from .state import state_bytes_per_request
from .vllm_buffers import deepstack_bytes
from .weights import WeightBytes

if TYPE_CHECKING:  # vLLM's pool rules and after-pool check load only for --engine vllm
    from .vllm_after import AfterPool
    from .vllm_lines import PoolRules

__all__ = ["Line", "Overrides", "Plan", "build_plan", "memory_ceiling", "with_device"]


@dataclass(frozen=True)
class Plan:
    model: str
    serve: ServeSpec
    lines: tuple[Line, ...]
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    kv_bytes_by_kind: dict[str, int]
    paging: BlockReport
    memory_ceiling_requests: int
    representations: tuple[tuple[str, str, int, str], ...]
    num_parameters: int
    active_parameters: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    budget: Budget | None = None
    shard: Shard = WHOLE
    kv_in_use_by_kind: dict[str, int] = field(default_factory=dict)
    window_tokens: int | None = None
    window_in_flight_tokens: int = 0  # what a windowed layer reserves beyond W - 1 (the release's)
    # with --lengths the ceiling counts requests of the mix's average; this counts the longest
    longest_ceiling_requests: int | None = None
    state_bytes_per_request: int = 0  # linear-attention / Mamba state: constant in context
    indexer_bytes_per_token: int = 0  # DeepSeek-V3.2's indexer K cache, its own line
    # the load's KV once every request decodes: windowed layers hold only their window then;
    # the kv_cache line is the peak, with each windowed prefill in flight (== it without windows)
    kv_decode_hold_bytes: int = 0
    after_pool: "AfterPool | None" = None  # vLLM: what runs after the pool, and the room for it
    # the encoder profile vLLM runs for a vision model (planned as lines or not), else None
    encoder_profile: EncoderBudget | None = None
    host: tuple[Line, ...] = ()  # host memory this rank holds (not the device's): LoRA's cache
    kv_offload: OffloadTier | None = None  # --kv-offloading-size: the host KV tier of a rank

    def line(self, key: str) -> int:
        return next((item.num_bytes for item in self.lines if item.key == key), 0)

    @property
    def device_bytes(self) -> int:
        return self.serve.device_bytes

    @property
    def committed_bytes(self) -> int:
        """Weights + metadata + runtime peak + KV in use + safety: committed plus reserved."""
        return sum(item.num_bytes for item in self.lines)

    @property
    def free_bytes(self) -> int:
        return self.device_bytes - self.committed_bytes

    @property
    def starts(self) -> bool:
        """The engine would start: its pool holds one max_model_len request and (vLLM) what
        runs after the pool fits in what it leaves (plain: True)."""
        if self.budget is None:
            return True
        return starts(self.budget, self.serve.context_tokens) and (
            self.after_pool is None or self.after_pool.fits)

    @property
    def fits(self) -> bool:
        """Nothing overcommitted; with an engine, it starts and the load's caches also fit in
        whole blocks."""
        if self.budget is not None and (not self.starts or self.cache_in_use_bytes >
                                        self.budget.num_gpu_blocks * self.budget.block_bytes):
            return False
        return self.free_bytes >= 0

    @property
    def cache_in_use_bytes(self) -> int:
        """The lines that grow with the load: KV, indexer K and the requests' fixed states."""
        return sum(self.line(key) for key in CACHE_LINES)

    @property
    def fixed_bytes(self) -> int:
        """Everything but the caches: what the ceiling divides the rest of the device by."""
        return self.committed_bytes - self.cache_in_use_bytes - self.line("kv_pool_spare")


CACHE_LINES = ("kv_cache", "indexer_cache", "state_cache")


def build_plan(spec: ModelSpec, serve: ServeSpec, overrides: Overrides = NO_OVERRIDES,
               shard: Shard = WHOLE, engine: EngineSpec = PLAIN_ENGINE) -> Plan:
    """The seed's ledger: weights, metadata, runtime peak, KV for the live tokens, safety; with
    an engine, its KV pool and headroom in place of the safety reserve (servecap.ledger.engines).
    The model is taken as the engine's release caches it (engines.as_cached)."""
    spec = as_cached(spec, release_row(engine))
    kv_bits = dtypes.lookup(serve.kv_dtype, "kv_dtype", dtypes.KV_DTYPES).bits
    weights, head = _fixed_lines(spec, serve, overrides, shard, engine)
    bsz = serve.block_size_tokens
    rules = None
    if engine.name == VLLM:
        from .vllm_lines import pool_rules

        rules = pool_rules(engine, spec, serve)
    budget_tokens = rules.window_tokens if rules else serve.max_num_batched_tokens
    per_request = kv_bytes_per_request(spec, kv_bits, serve.context_tokens, bsz, shard,
                                       budget_tokens)
    lengths = list(serve.live_lengths)
    kv_by_kind = kv_in_use_by_kind(spec, kv_bits, lengths, serve, shard, budget_tokens)
    kv_total = sum(kv_by_kind.values())
    hold = sum(kv_in_use_by_kind(spec, kv_bits, lengths, serve, shard).values())
    kv_line = Line("kv_cache", "KV cache in use", kv_total,
                   kv_from(lengths, bsz, serve) + window_from(
                       kv_by_kind, hold, rules.why if rules else
                       f"{serve.max_num_batched_tokens:,} batched tokens")
                   + (f"; K and V per head: {PER_HEAD_REASON}"
                      if spec.attention.mla_per_head_cache else ""))
    cache_lines = (kv_line,) + extra_cache_lines(spec, lengths, bsz, shard)
    cache_total = sum(item.num_bytes for item in cache_lines)
    state = state_bytes_per_request(spec, shard.layer_ids(spec), shard.tensor_parallel_size)
    whole_request = per_request + state + indexer_request(spec, serve.context_tokens, bsz, shard)
    result = None
    if engine.name == PLAIN:
        safety, safety_from = _safety(serve)
        lines = head + cache_lines + (Line("safety", "safety reserve", safety, safety_from),)
    else:
        lines, result = _engine_lines(spec, serve, shard, engine, head, cache_lines, kv_bits,
                                      rules)
    after = None
    if engine.name == VLLM and starts(result, serve.context_tokens):
        from .vllm_after import after_pool
        from .vllm_lines import profile_batch

        after = after_pool(spec, serve, shard, engine, lines, result,
                           profile_batch(engine, serve))
    fixed = sum(item.num_bytes for item in lines) - cache_total
    longest = memory_ceiling(serve.device_bytes, fixed, whole_request)
    if serve.lengths:
        per_request = -(-kv_total // len(lengths))
        whole_request = -(-cache_total // len(lengths))
    ceiling = memory_ceiling(serve.device_bytes, fixed, whole_request)
    per_token = kv_bytes_per_token(spec, kv_bits, shard)
    tier = _offload(serve, result.block_bytes if result else per_token * bsz, per_token)
    return Plan(
        model=spec.name, serve=serve, lines=lines,
        kv_bytes_per_token=kv_bytes_per_token(spec, kv_bits, shard),
        kv_bytes_per_request=per_request,
        kv_bytes_by_kind=kv_bytes_by_layer_kind(spec, kv_bits, serve.context_tokens, bsz, shard,
                                                budget_tokens),
        paging=paging_report(lengths, bsz, serve.shared_prefix_tokens),
        memory_ceiling_requests=ceiling if result is None else int(result.max_concurrency),
        representations=representations(serve, weights, kv_bits),
        num_parameters=weights.num_parameters, active_parameters=active_parameters(spec),
        notes=plan_notes(spec, serve, weights, fixed, result) + engine_notes(engine)
        + encoder_plan(spec, serve, shard, _line(head, "runtime_peak"), engine,
                       _model_bits(serve) // 8)[1]
        + cache_form_notes(spec, kv_bits_per_token_layer(spec, kv_bits, shard),
                           shard.tensor_parallel_size) + after_notes(after),
        budget=result, after_pool=after, encoder_profile=encoder_profile(
            spec, serve, shard, engine, _model_bits(serve) // 8),
        shard=shard,
        kv_in_use_by_kind=kv_by_kind, window_tokens=spec.attention.sliding_window_tokens,
        window_in_flight_tokens=budget_tokens,
        longest_ceiling_requests=longest if serve.lengths and result is None else None,
        state_bytes_per_request=state, indexer_bytes_per_token=indexer_bytes_per_token(spec, shard),
        kv_decode_hold_bytes=hold,
        host=_host_lines(spec, serve, shard) + offload_lines(
            tier, _tokens_per_request(serve)),
        kv_offload=tier,
    )


def _host_lines(spec: ModelSpec, serve: ServeSpec, shard: Shard) -> tuple[Line, ...]:
    return lora_lines(spec, serve.lora, shard, _model_bits(serve))[1]


def _offload(serve: ServeSpec, block_bytes: int, per_token: int) -> OffloadTier | None:
    """The host KV tier of this rank (--kv-offloading-size), from its GPU block's bytes."""
    if serve.kv_offload is None:
        return None
    return offload_tier(serve.kv_offload, block_bytes, serve.block_size_tokens, per_token)


def _tokens_per_request(serve: ServeSpec) -> int:
    """The scenario's request length: --lengths' mean, else the context."""
    lengths = serve.live_lengths
    return -(-sum(lengths) // len(lengths))


def _model_bits(serve: ServeSpec) -> int:
    return dtypes.lookup(serve.activation_dtype, "activation_dtype",
                         dtypes.ACTIVATION_DTYPES).bits


def _line(lines: tuple[Line, ...], key: str) -> Line:
    return next(item for item in lines if item.key == key)


def memory_ceiling(device_bytes: int, fixed_bytes: int, per_request_bytes: int) -> int:
    """Memory-only ceiling = floor((device - everything but KV) / KV per request) [requests]
    (seed 000); 0 when nothing is left or a request needs no KV."""
    return max(0, (device_bytes - fixed_bytes) // per_request_bytes) if per_request_bytes else 0


def _fixed_lines(spec: ModelSpec, serve: ServeSpec, overrides: Overrides, shard: Shard,
                 engine: EngineSpec) -> tuple[WeightBytes, tuple[Line, ...]]:
    """Weights, metadata, runtime peak, and (engines, multi-GPU) non-torch and comm buffers."""
    weights, weights_from = rank_weights(spec, serve, overrides, shard)
    pp = 1 if shard.first_stage and shard.last_stage else 2
    vllm = engine.name == VLLM
    if vllm:
        from .vllm_lines import overhead as vllm_overhead
        from .vllm_lines import resident_line, runtime_line
    if vllm and serve.runtime_peak_bytes is None:
        runtime = runtime_line(spec, serve, shard, engine)
    else:
        runtime = Line("runtime_peak", "runtime peak", *_runtime_peak(spec, serve, shard),
                       serve.runtime_peak_bytes is not None)
    measured = overrides.per_device and overrides.weights is not None
    head = (
        Line("weights", "weights", weights.param_bytes, weights_from,
             overrides.weights is not None),
        Line("weight_metadata", "weight metadata",
             weights.metadata_bytes, metadata_from(weights, overrides)),
    ) + (resident_line(spec, shard, engine) if vllm and not measured else ()) \
        + lora_lines(spec, serve.lora, shard, _model_bits(serve))[0] \
        + eplb_lines(spec, serve.eplb, shard, *weight_format(spec, serve, overrides)) \
        + (runtime,) + encoder_plan(spec, serve, shard, runtime, engine,
                                    _model_bits(serve) // 8)[0]
    link, _ = tp_link(serve.device_label, serve.interconnect, shard.tensor_parallel_size,
                      serve.gpus_per_node)
    tail = (vllm_overhead(spec, serve, shard, engine, pp) if vllm
            else overhead_lines(engine, shard.tensor_parallel_size, pp, link or NVLINK))
    return weights, head + _rotary(spec, engine, overrides) \
        + _tower(spec, serve, engine, overrides, shard) + tail


def _rotary(spec: ModelSpec, engine: EngineSpec, overrides: Overrides) -> tuple[Line, ...]:
    """vLLM only, and not when the weights line is a measurement that already holds it."""
    measured = overrides.per_device and overrides.weights is not None
    if engine.name != VLLM or measured or not spec.max_position_embeddings:
        return ()
    return (rotary_cache_line(spec, release_row(engine)),)


def _tower(spec: ModelSpec, serve: ServeSpec, engine: EngineSpec, overrides: Overrides,
           shard: Shard) -> tuple[Line, ...]:
    """The vision tower vLLM loads with the model (ledger/encoders.py), in the model dtype:
    vLLM only (other engines' towers are not read), and not when the weights line is a
    figure that already holds it (a measurement, or the checkpoint files' headers, which
    hold the tower's tensors)."""
    if engine.name != VLLM or overrides.weights is not None or spec.encoder is None:
        return ()
    whole = shard.tensor_parallel_size > 1 and serve.encoder is not None and \
        serve.encoder.data_parallel(spec.vision)
    line = encoder_line(spec.encoder, 1 if whole else shard.tensor_parallel_size,
                        _model_bits(serve), whole)
    extra, why = deepstack_bytes(spec, release_row(engine), serve.max_num_batched_tokens,
                                 _model_bits(serve) // 8)
    return (replace(line, num_bytes=line.num_bytes + extra, source=line.source + why),)


def _engine_lines(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine: EngineSpec,
                  head: tuple[Line, ...], cache_lines: tuple[Line, ...], kv_bits: int,
                  rules: "PoolRules | None"):
    """The engine's pool replaces the safety reserve: KV in use + the pool's spare blocks fill
    the pool; what the engine keeps outside its budget is the headroom line."""
    world = shard.tensor_parallel_size * (1 if shard.first_stage and shard.last_stage else 2)
    pool, headroom, how, headroom_from = pool_and_headroom(engine, serve.device_bytes, head,
                                                           world)
    geo = KVGeometry(spec, kv_bits_per_token_layer(spec, kv_bits, shard) // 8,
                     shard.layer_ids(spec), serve.context_tokens,
                     rules.window_tokens if rules else serve.max_num_batched_tokens,
                     serve.block_size_tokens, kv_bits, shard.tensor_parallel_size,
                     serve.mamba_cache_mode, rules.checkpoint_alignment if rules else 0,
                     rules.all_chunk_aligned if rules else True)
    result = budget(engine, pool, geo, how)
    usable = result.num_gpu_blocks * result.block_bytes
    spare = max(usable - sum(item.num_bytes for item in cache_lines), 0)
    measured = engine.kv_cache_memory_bytes is not None
    lines = head + cache_lines + (
        Line("kv_pool_spare", "KV pool, unused blocks", spare,
             f"{how}: {result.num_gpu_blocks:,} blocks x {result.block_bytes:,} B", measured),
        Line("safety", "headroom outside the engine budget", max(headroom, 0), headroom_from),
    )
    return lines, result


def _runtime_peak(spec: ModelSpec, serve: ServeSpec, shard: Shard) -> tuple[int, str]:
    if serve.runtime_peak_bytes is not None:
        return serve.runtime_peak_bytes, "declared peak of activations, workspaces, graphs"
    return estimate_runtime_peak(spec, serve, shard)


def _safety(serve: ServeSpec) -> tuple[int, str]:
    if serve.safety_bytes is not None:
        if serve.safety_fraction is not None:
            return serve.safety_bytes, f"declared: {serve.safety_fraction:.0%} of the device"
        return serve.safety_bytes, "declared: deliberate capacity"
    fraction = DEFAULT_SAFETY_FRACTION
    return int(serve.device_bytes * fraction), (
        f"default: {fraction:.0%} of the device, vLLM's headroom at gpu_memory_utilization "
        f"{1 - fraction:.2f} (--engine vllm plans its release's own default)")


def with_device(serve: ServeSpec, device_bytes: int) -> ServeSpec:
    """The same deployment on another device size (a declared % safety scales with it)."""
    if serve.safety_fraction is not None:
        return replace(serve, device_bytes=device_bytes,
                       safety_bytes=int(device_bytes * serve.safety_fraction))
    return replace(serve, device_bytes=device_bytes)
