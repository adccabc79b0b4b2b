"""The notes a plan carries: what would stop the engine starting, and which rules it used."""

from .engines import PER_HEAD_REASON, VLLM, Budget, EngineSpec, starts
from .model import ModelSpec
from .serve import ServeSpec
from .units import decimal_size_note
from .weights import WeightBytes


def plan_notes(spec: ModelSpec, serve: ServeSpec, weights: WeightBytes, fixed: int,
           result: Budget | None = None) -> tuple[str, ...]:
    notes = list(spec.notes) + [n for n in (decimal_size_note(serve.device_label),) if n]
    longest, limit = max(serve.live_lengths), spec.max_position_embeddings
    if limit and longest > limit:
        notes.append(f"{longest:,} tokens per request exceed max_position_embeddings {limit:,}: "
                     "vLLM refuses that max_model_len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    if weights.param_bytes + weights.metadata_bytes > serve.device_bytes:
        notes.append("the weights alone do not fit on this device: memory ceiling 0")
    elif result is not None and result.kv_pool_bytes <= 0:
        notes.append(f"{result.engine}: no memory left for the KV pool ({result.how}): the "
                     "engine would refuse to start")
    elif result is not None and not starts(result, serve.context_tokens):
        notes.append(f"{result.engine}: its {result.num_gpu_blocks:,} KV blocks cannot hold "
                     f"one {serve.context_tokens:,}-token request ({result.blocks_per_request:,} "
                     "blocks): the engine would refuse to start")
    elif fixed > serve.device_bytes:
        notes.append("weights, runtime peak and safety leave no room for any KV: ceiling 0")
    return tuple(notes)


def cache_form_notes(spec: ModelSpec, per_layer_bits: int, tp: int) -> tuple[str, ...]:
    """An MLA model cached per head (engines.as_cached): the sum, and its size against the
    latent."""
    att = spec.attention
    if not att.mla_per_head_cache:
        return ()
    heads = -(-att.num_heads // tp)
    head = att.qk_nope_head_dim + att.qk_rope_head_dim
    latent = att.kv_lora_rank + att.qk_rope_head_dim
    bits = per_layer_bits // (2 * heads * head)
    return (f"vllm: {PER_HEAD_REASON}: 2 [K,V] x {heads} heads ({att.num_heads} / tp {tp}) x "
            f"{head} (qk_nope {att.qk_nope_head_dim} + qk_rope {att.qk_rope_head_dim}; V "
            f"{att.v_head_dim} padded to it) x {bits // 8} B = {per_layer_bits // 8:,} B per "
            f"token per layer, {per_layer_bits / (latent * bits):.1f}x the {latent}-wide "
            "latent MLA caches from 0.7.1",)


def after_notes(after) -> tuple[str, ...]:
    """vLLM's after-pool check (ledger/vllm_after.py's AfterPool), when it fails."""
    if after is None or after.fits:
        return ()
    return (f"vllm: {after.sentence()} ({after.how}): the engine would fail to start after "
            "sizing its pool",)


def engine_notes(engine: EngineSpec) -> tuple[str, ...]:
    """Which release's rules a vLLM plan used (or the nearest row, said so)."""
    return (engine.version_note,) if engine.name == VLLM and engine.version_note else ()
