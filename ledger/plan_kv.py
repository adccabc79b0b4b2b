"""The plan's cache lines: KV in use for the live lengths (paged, windowed layers at their
in-flight peak, a shared prefix stored once), and the indexer K cache and fixed states."""

from collections import Counter

from .kv import Shard, indexer_bytes_per_token, kv_bytes_by_layer_kind
from .lines import Line
from .model import ModelSpec
from .serve import ServeSpec
from .state import state_bytes_per_request
from .units import plural


def kv_in_use_by_kind(spec: ModelSpec, kv_bits: int, lengths: list[int], serve: ServeSpec,
                       shard: Shard, budget_tokens: int | None = None) -> dict[str, int]:
    """Σ_r over live requests, paged, split into full and sliding-window layers; a shared
    prefix's full blocks are stored once (windowed layers keep each request's own window).
    budget_tokens: windowed layers at their in-flight prefill peak (else the decode hold)."""
    bsz = serve.block_size_tokens
    out = {"full": 0, "sliding": 0}
    for n, count in Counter(lengths).items():  # equal lengths once: 16 x 4,096 is one call
        for kind, num_bytes in kv_bytes_by_layer_kind(spec, kv_bits, n, bsz, shard,
                                                      budget_tokens).items():
            out[kind] = out.get(kind, 0) + num_bytes * count
    shared_tokens = min([serve.shared_prefix_tokens, *lengths]) // bsz * bsz
    if shared_tokens and len(lengths) > 1:
        full = kv_bytes_by_layer_kind(spec, kv_bits, shared_tokens, bsz, shard)["full"]
        out["full"] -= full * (len(lengths) - 1)
    return out


def kv_from(lengths: list[int], bsz: int, serve: ServeSpec) -> str:
    load = (f"{len(lengths)} x {serve.context_tokens:,} tokens" if not serve.lengths
            else f"Σ of {len(lengths)} lengths = {sum(lengths):,} tokens")
    shared = f", {serve.shared_prefix_tokens:,}-token prefix shared" \
        if serve.shared_prefix_tokens else ""
    return f"{load}, {serve.kv_dtype}, {bsz}-token blocks{shared}"


def window_from(kv_by_kind: dict[str, int], hold: int, in_flight: str) -> str:
    """Windowed layers: the line is the peak, each request's prefill in flight (vLLM's
    SlidingWindowSpec: W - 1 + the tokens in flight + 1 block, at most its own); the steady
    decode hold beside it."""
    if not kv_by_kind.get("sliding"):
        return ""
    return (f"; windowed layers at the in-flight prefill peak (W - 1 + {in_flight} + 1 "
            f"block, vLLM's SlidingWindowSpec); steady decode hold {hold:,} B")


def indexer_request(spec: ModelSpec, tokens: int, bsz: int, shard: Shard) -> int:
    return -(-tokens // bsz) * bsz * indexer_bytes_per_token(spec, shard)


def extra_cache_lines(spec: ModelSpec, lengths: list[int], bsz: int,
                       shard: Shard) -> tuple[Line, ...]:
    """The indexer K cache (paged like the KV) and the fixed states, when the model has them."""
    out = []
    per_token = indexer_bytes_per_token(spec, shard)
    if per_token:
        held = sum(-(-n // bsz) * bsz for n in lengths)
        out.append(Line("indexer_cache", "indexer K cache in use", held * per_token,
                        f"{held:,} slots x {per_token:,} B (fp8 K + fp32 scale per 128, "
                        f"{len(shard.layer_ids(spec))} layers)"))
    state = state_bytes_per_request(spec, shard.layer_ids(spec), shard.tensor_parallel_size)
    if state:
        held_layers = len(set(spec.state_layers) & set(shard.layer_ids(spec)))
        out.append(Line("state_cache", "fixed state in use", state * len(lengths),
                        f"{plural(len(lengths), 'request')} x {state:,} B ({held_layers} "
                        f"{spec.state.kind} layers: conv {spec.state.conv_dtype}, recurrent "
                        f"{spec.state.ssm_dtype})"))
    return tuple(out)
