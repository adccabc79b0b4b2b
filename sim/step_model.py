"""One iteration's time from its terms: GEMMs, attention, weight and KV reads, collectives,
pipeline stages and fixed overheads; every term named so it can be printed and overridden."""

import math
import random

from servecap.ledger.collectives import allreduce_s

# defined beside a request's state (sim/seq.py), whose compiled kernel the scheduler loop
# calls it in; the step model's callers take it from here
from .seq import prefill_pairs  # noqa: F401


def experts_touched_share(num_tokens: int, num_experts: int, experts_per_token: int) -> float:
    """Expected share of routed experts a batch reads: 1 - (1 - k/E)^B for B tokens each
    picking k of E experts uniformly (the expected number of distinct experts is E times it).
    1.0 for a dense model (E = 0)."""
    if num_experts <= 0 or experts_per_token <= 0:
        return 1.0
    if num_tokens <= 0:
        return 0.0
    return 1.0 - (1.0 - experts_per_token / num_experts) ** num_tokens


def terms(coef, num_prefill: int, num_decode: int, prefill_attention_tokens: int,
          decode_context_tokens: int, prefill_context_tokens: int = 0) -> dict:
    """The step's terms in seconds, on the binding pipeline stage's rank:
    gemm_s = (dense FLOPs per token / gemm_efficiency + routed experts' FLOPs per token /
              moe_gemm_efficiency) x tokens / flops_per_s;
    attention_s = attention_flops_per_token_pair x (query, key) pairs /
                  (attention rate x attention_efficiency), the pairs being the prefill
                  tokens' keys attended plus every decode sequence's context;
    memory_s = (dense weights + routed experts touched + KV read and written) /
               (bandwidth_bytes_per_s x bandwidth_efficiency);
    compute and memory overlap (max); collective_s (tensor-parallel all-reduces, see
    collective_s) and overhead_s (per step, per layer, per MoE layer) add on top."""
    return dict(zip(TERMS, _terms(coef, num_prefill, num_decode, prefill_attention_tokens,
                                  decode_context_tokens, prefill_context_tokens), strict=True))


TERMS = ("gemm_s", "attention_s", "memory_s", "collective_s", "overhead_s", "eager_s", "cpu_s")


def _terms(c, num_prefill: int, num_decode: int, prefill_attention_tokens: int,
           decode_context_tokens: int, prefill_context_tokens: int) -> tuple:
    """terms()'s values in TERMS order (step_s reads them without building the dict)."""
    tokens = num_prefill + num_decode
    dense = c.flops_per_token - c.moe_flops_per_token
    gemm = dense * tokens / (c.flops_per_s * c.gemm_efficiency) \
        + c.moe_flops_per_token * tokens / (c.flops_per_s * c.moe_gemm_efficiency)
    attn_rate = (c.attention_flops_per_s or c.flops_per_s) * c.attention_efficiency
    attention = c.attention_flops_per_token_pair * (prefill_attention_tokens
                                                    + decode_context_tokens) / attn_rate
    weights = c.weights_bytes - c.moe_expert_bytes * (
        1.0 - experts_touched_share(tokens, c.num_experts, c.experts_per_token))
    kv = c.kv_bytes_per_token * (prefill_context_tokens + decode_context_tokens + tokens)
    # each decode stream (and the prefilling request) reads and writes its fixed state once
    kv += 2 * c.state_bytes_per_request * (num_decode + (1 if num_prefill else 0))
    memory = (weights + kv) / (c.bandwidth_bytes_per_s * c.bandwidth_efficiency)
    collective = collective_s(c, tokens)
    overhead = c.step_overhead_s + c.layer_overhead_s * c.num_layers \
        + c.moe_layer_overhead_s * c.num_moe_layers
    eager = c.eager_layer_s * c.num_layers if eager_step(c, num_prefill, tokens) else 0.0
    cpu = c.cpu_step_s + c.cpu_per_seq_s * (num_decode + (1 if num_prefill else 0))
    return gemm, attention, memory, collective, overhead, eager, cpu


def collective_s(coef, tokens: int) -> float:
    """The step's tensor-parallel communication: measured_collective_s plus the linear part,
    collective_bytes_per_token x tokens / interconnect_bytes_per_s + collective_latency_s
    (the ring estimate where no table measured the device; 0 when no bytes cross)."""
    linear = (coef.collective_bytes_per_token * tokens / coef.interconnect_bytes_per_s
              + coef.collective_latency_s) if coef.collective_bytes_per_token else 0.0
    return linear + measured_collective_s(coef, tokens)


def measured_collective_s(coef, tokens: int) -> float:
    """collective_calls all-reduces of the step's real message, tokens x
    collective_message_bytes_per_token bytes, each at the time collective_table measured
    for that size (ledger/collectives.py); 0 without a table."""
    if not coef.collective_table or not coef.collective_calls or tokens <= 0:
        return 0.0
    return coef.collective_calls * allreduce_s(
        coef.collective_table, tokens * coef.collective_message_bytes_per_token)


def eager_step(coef, num_prefill: int, tokens: int) -> bool:
    """Whether a step runs outside CUDA graphs: more tokens than the largest captured batch
    (graph_max_tokens; 0 with --enforce-eager: every step), or a prefill where the engine
    captures decode batches only (graph_prefill 0). Never without an eager cost."""
    if not coef.eager_layer_s:
        return False
    return tokens > coef.graph_max_tokens or bool(num_prefill and not coef.graph_prefill)


def stage_s(parts: dict, cpu_overlap: float = 0.0) -> float:
    """One stage: compute and memory traffic overlap; collectives and overheads do not; the
    host's cpu_s adds on, or hides behind the GPU's time under async scheduling."""
    return _stage(parts["gemm_s"], parts["attention_s"], parts["memory_s"],
                  parts["collective_s"], parts["overhead_s"], parts.get("eager_s", 0.0),
                  parts.get("cpu_s", 0.0), cpu_overlap)


def _stage(gemm: float, attention: float, memory: float, collective: float, overhead: float,
           eager: float, cpu: float, cpu_overlap: float) -> float:
    """stage_s on the terms as values."""
    compute = gemm + attention
    gpu = (compute if compute > memory else memory) + collective + overhead + eager
    if cpu_overlap:
        return gpu if gpu > cpu else cpu
    return gpu + cpu


def step_s(coef, num_prefill: int, num_decode: int, prefill_attention_tokens: int,
           decode_context_tokens: int, prefill_context_tokens: int = 0) -> float:
    """Seconds for one iteration: pipeline_parallel_size stages in turn (the binding stage's
    time each: one batch in flight, so every stage idles 1 - 1/pp of the step, the bubble),
    plus the activations handed between stages (pipeline_bytes_per_token over the link and
    collective latency per hop)."""
    one = _stage(*_terms(coef, num_prefill, num_decode, prefill_attention_tokens,
                         decode_context_tokens, prefill_context_tokens), coef.cpu_overlap)
    pp = coef.pipeline_parallel_size
    if pp == 1:
        return one
    tokens = num_prefill + num_decode
    hops = (pp - 1) * (coef.pipeline_bytes_per_token * tokens / coef.interconnect_bytes_per_s
                       + coef.pipeline_latency_s)
    return pp * one + hops


def dense_decode_constants(coef) -> tuple | None:
    """(gemm s per token, attention s per pair, weight bytes, KV bytes per token, effective
    bandwidth, link s per token, fixed s per step) of a dense single-stage model, the
    constants step_s folds for decode-only steps (the host's per-sequence cost rides with the
    link's linear part, both linear in sequences and outside the overlap; eager steps add
    decode_eager_s, a measured all-reduce table adds measured_collective_s);
    None for MoE, pipeline stages, fixed per-request states (hybrids) and async scheduling,
    which step_s prices."""
    c = coef
    if c.num_experts or c.moe_flops_per_token or c.pipeline_parallel_size > 1 \
            or c.state_bytes_per_request or c.cpu_overlap:
        return None
    gemm_per_token = c.flops_per_token / (c.flops_per_s * c.gemm_efficiency)
    attn_per_pair = c.attention_flops_per_token_pair / (
        (c.attention_flops_per_s or c.flops_per_s) * c.attention_efficiency)
    bw = c.bandwidth_bytes_per_s * c.bandwidth_efficiency
    link_per_token = c.collective_bytes_per_token / c.interconnect_bytes_per_s + c.cpu_per_seq_s
    fixed = c.cpu_step_s + c.step_overhead_s + c.layer_overhead_s * c.num_layers \
        + c.moe_layer_overhead_s * c.num_moe_layers \
        + (c.collective_latency_s if c.collective_bytes_per_token else 0.0)
    return (gemm_per_token, attn_per_pair, c.weights_bytes, c.kv_bytes_per_token, bw,
            link_per_token, fixed)


def step_constants(coef) -> tuple | None:
    """What step_s(coef, prefill, decode, pairs, context, cached) needs for any step of a
    single-stage model without routed experts, for the scheduler loop to price a mixed
    iteration with _terms' and _stage's own expressions in their order (the same floats):
    (dense FLOPs per token, routed FLOPs per token, the two GEMM rates, attention FLOPs per
    pair, the attention rate, weight bytes read, KV bytes per token, fixed-state bytes per
    request, the effective bandwidth, overheads, eager seconds (0: never eager), the
    largest graph-captured batch, whether a prefill runs eager, host
    seconds per step and per sequence, cpu_overlap, whether collectives cost anything, and
    the largest tokens, attended tokens, KV tokens and sequences whose products stay
    below 2^61).
    Eager seconds apply above graph_max_tokens tokens, or to a prefill where graphs capture
    decode batches only (eager_step).
    None where a term is not priced this way (pipeline stages, routed experts) or a factor
    is not the integer or float the inlined arithmetic types it as; step_s prices those."""
    c = coef
    if c.pipeline_parallel_size != 1 or c.num_experts:
        return None
    dense = c.flops_per_token - c.moe_flops_per_token
    gemm_rate = c.flops_per_s * c.gemm_efficiency
    moe_rate = c.flops_per_s * c.moe_gemm_efficiency
    attn_rate = (c.attention_flops_per_s or c.flops_per_s) * c.attention_efficiency
    weights = c.weights_bytes - c.moe_expert_bytes * (
        1.0 - experts_touched_share(1, c.num_experts, c.experts_per_token))
    bw = c.bandwidth_bytes_per_s * c.bandwidth_efficiency
    overhead = c.step_overhead_s + c.layer_overhead_s * c.num_layers \
        + c.moe_layer_overhead_s * c.num_moe_layers
    eager = c.eager_layer_s * c.num_layers if c.eager_layer_s else 0.0
    ints = (dense, c.moe_flops_per_token, c.attention_flops_per_token_pair,
            c.kv_bytes_per_token, c.state_bytes_per_request, c.graph_max_tokens)
    floats = (gemm_rate, moe_rate, attn_rate, weights, bw, overhead, eager, c.cpu_step_s,
              c.cpu_per_seq_s)
    if any(type(v) is not int or not 0 <= v < 2**60 for v in ints) \
            or any(type(v) is not float for v in floats):
        return None
    collectives = bool(c.collective_bytes_per_token) or bool(
        c.collective_table and c.collective_calls)
    top = 2**61  # the KV bytes add two products: each below 2^61 keeps the sum below 2^63
    caps = tuple(top // v if v else top for v in (max(dense, c.moe_flops_per_token),
                                                  c.attention_flops_per_token_pair,
                                                  c.kv_bytes_per_token,
                                                  2 * c.state_bytes_per_request))
    return (dense, c.moe_flops_per_token, gemm_rate, moe_rate,
            c.attention_flops_per_token_pair, attn_rate, weights, c.kv_bytes_per_token,
            c.state_bytes_per_request, bw, overhead, eager, c.graph_max_tokens,
            not c.graph_prefill, c.cpu_step_s, c.cpu_per_seq_s, bool(c.cpu_overlap),
            collectives) + caps


def decode_pricer(coef):
    """step_s for decode-only steps as a function of (sequences, context tokens), with the
    arithmetic of a dense single-stage model inlined and its constants folded (the
    simulator's hot path inlines the same arithmetic); MoE, pipeline stages and hybrids go
    through step_s."""
    dense = dense_decode_constants(coef)
    if dense is None:
        return _decode_step_s(coef)
    gemm_per_token, attn_per_pair, wb, kvb, bw, link_per_token, fixed = dense

    def price(n: int, live: int) -> float:
        compute = gemm_per_token * n + attn_per_pair * live
        memory = (wb + kvb * (live + n)) / bw
        return (compute if compute > memory else memory) + link_per_token * n + fixed \
            + decode_eager_s(coef, n) + measured_collective_s(coef, n)
    return price


def decode_step_constants(coef) -> tuple:
    """What step_s(coef, 0, n, 0, live) needs for decode-only steps of a model the dense
    inlining does not cover: (attention FLOPs per pair, the attention rate, KV bytes per
    token, the effective bandwidth, cpu_overlap, pipeline stages) and per_n(n), the terms
    that depend on the batch size alone (GEMMs, weights and experts read, fixed state,
    collectives, overheads, the host, pipeline hops), taken from terms() itself. A step is
    then decode_step_price's arithmetic, terms()'s and stage_s's own expressions in their
    order: the same floats, without a dict of terms per step."""
    c = coef
    pp = c.pipeline_parallel_size

    def per_n(n: int) -> tuple:
        parts = terms(c, 0, n, 0, 0)
        weights = c.weights_bytes - c.moe_expert_bytes * (
            1.0 - experts_touched_share(n, c.num_experts, c.experts_per_token))
        hops = (pp - 1) * (c.pipeline_bytes_per_token * n / c.interconnect_bytes_per_s
                           + c.pipeline_latency_s) if pp != 1 else 0.0
        return (parts["gemm_s"], weights, 2 * c.state_bytes_per_request * n,
                parts["collective_s"], parts["overhead_s"], parts["eager_s"],
                parts["cpu_s"], hops)
    shared = (c.attention_flops_per_token_pair,
              (c.attention_flops_per_s or c.flops_per_s) * c.attention_efficiency,
              c.kv_bytes_per_token, c.bandwidth_bytes_per_s * c.bandwidth_efficiency,
              bool(c.cpu_overlap), pp)
    return shared, per_n


def decode_step_price(shared: tuple, per: tuple, n: int, live: int) -> float:
    """One decode-only step from decode_step_constants (the compiled decode loop inlines
    the same arithmetic)."""
    pair, attn_rate, kvb, bw, overlap, pp = shared
    gemm, weights, state, collective, overhead, eager, cpu, hops = per
    attention = pair * live / attn_rate
    kv = kvb * (live + n)
    kv += state
    memory = (weights + kv) / bw
    compute = gemm + attention
    gpu = (compute if compute > memory else memory) + collective + overhead + eager
    one = (gpu if gpu > cpu else cpu) if overlap else gpu + cpu
    return one if pp == 1 else pp * one + hops


def _decode_step_s(coef):
    """decode_step_price with its per-n constants computed once per batch size."""
    shared, per_n = decode_step_constants(coef)
    known: dict[int, tuple] = {}

    def price(n: int, live: int) -> float:
        per = known.get(n)
        if per is None:
            per = known[n] = per_n(n)
        return decode_step_price(shared, per, n, live)
    return price


def decode_eager_s(coef, n: int) -> float:
    """The eager cost of a decode-only step of n sequences (0 inside CUDA graphs)."""
    return coef.eager_layer_s * coef.num_layers if eager_step(coef, 0, n) else 0.0


def ring_allreduce_s(num_bytes: float, num_ranks: int, link_bytes_per_s: float,
                     latency_s: float) -> float:
    """Ring all-reduce: 2(n-1)/n x bytes over each rank's link, 2(n-1) latency-bound steps
    (NCCL's ring; Patarasuk & Yuan 2009). 0 for one rank."""
    if num_ranks <= 1:
        return 0.0
    steps = 2 * (num_ranks - 1)
    return steps / num_ranks * num_bytes / link_bytes_per_s + steps * latency_s


def step_jitter(cv: float, seed: int):
    """None for cv = 0; else a seeded draw of multiplicative step-time factors with mean 1 and
    coefficient of variation cv (lognormal: sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2), the
    residual spread a calibration measured."""
    if not cv:
        return None
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    mu = -sigma * sigma / 2
    return lambda: rng.lognormvariate(mu, sigma)
