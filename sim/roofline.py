"""Iteration time from a roofline of the device and the model: every coefficient visible."""

import math
from dataclasses import asdict, dataclass, fields, replace

from servecap.ledger.collectives import TABLES
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Plan

from .step_model import step_s

SPEED_OF_LIGHT = "speed of light: peak FLOPS and bandwidth, no overheads (uncalibrated)"
NON_NEGATIVE = ("weights_bytes", "kv_bytes_per_token", "flops_per_token", "step_overhead_s",
                "attention_flops_per_token_pair", "attention_flops_per_s", "layer_overhead_s",
                "num_layers", "moe_expert_bytes", "moe_flops_per_token", "num_experts",
                "experts_per_token", "num_moe_layers", "moe_layer_overhead_s",
                "collective_bytes_per_token", "collective_latency_s", "pipeline_bytes_per_token",
                "pipeline_latency_s", "step_time_cv", "state_bytes_per_request", "cpu_step_s",
                "cpu_per_seq_s", "eager_layer_s", "graph_max_tokens", "frontend_s",
                "frontend_latency_s", "collective_calls", "collective_message_bytes_per_token",
                "frontend_prompt_token_s", "frontend_output_token_s", "host_link_bytes_per_s")
INTS = {"weights_bytes", "kv_bytes_per_token", "flops_per_token",
        "attention_flops_per_token_pair", "num_layers", "moe_expert_bytes",
        "moe_flops_per_token", "num_experts", "num_moe_layers",
        "experts_per_token", "tensor_parallel_size", "pipeline_parallel_size",
        "expert_parallel_size", "state_bytes_per_request", "graph_max_tokens",
        "collective_calls", "collective_message_bytes_per_token"}
LABELS = {"source", "efficiency_source", "collective_table", "collective_source"}

@dataclass(frozen=True)
class Coefficients:
    """What one forward pass costs on one rank of the binding pipeline stage (see
    step_model.terms). Bytes are read from device memory at bandwidth_bytes_per_s x
    bandwidth_efficiency; GEMM FLOPs run at flops_per_s (the weights' dtype rate) x
    gemm_efficiency, attention FLOPs at attention_flops_per_s (0: flops_per_s) x
    attention_efficiency; step_overhead_s is paid once per iteration and layer_overhead_s once
    per layer (launch, norms, sampling, scheduling). Routed experts (moe_expert_bytes of the
    weights) are read only as far as the batch touches them; their share of the FLOPs
    (moe_flops_per_token) runs at moe_gemm_efficiency (grouped expert GEMMs), and each of the
    num_moe_layers pays moe_layer_overhead_s (routing, the grouped kernel's fixed cost).
    Tensor-parallel all-reduces: where a published table measured the device at this GPU count
    (collective_table, ledger/collectives.py), each of the collective_calls all-reduces of a
    step costs the measured time of a message of tokens x collective_message_bytes_per_token;
    collective_bytes_per_token / interconnect_bytes_per_s per token plus collective_latency_s
    per step price what no table covers, the ring estimate (and an expert-parallel
    all-to-all). collective_source says which. Pipeline stages hand pipeline_bytes_per_token
    over the link.
    step_time_cv is the residual spread of a calibration (0: every step takes its mean).
    Efficiencies of 1 and no overheads: the speed-of-light roofline.
    swap_bandwidth_bytes_per_s prices moving KV to and from host memory (swap preemption);
    host_link_bytes_per_s the device's link to host memory (ledger/devices.py host_link, a
    vendor figure), which prices loading a KV offload tier's blocks back (0: not known, the
    swap bandwidth stands in, said so).
    The serving engine's own terms (sim/vllm_engine.py, per vLLM release; all 0 without an
    engine): cpu_step_s per iteration and cpu_per_seq_s per sequence in it (scheduling, input
    preparation, sampling, detokenization and output processing on the host), added to the
    GPU's time, or overlapped with it (the larger of the two) when cpu_overlap is 1 (async
    scheduling); eager_layer_s per layer for a step CUDA graphs do not cover: more than
    graph_max_tokens tokens (0: every step, --enforce-eager), or a prefill when
    graph_prefill is 0 (V0 captures decode batches only); frontend_s per request, before the
    engine sees it (the API server's HTTP handling and tokenization, one request at a time:
    a burst queues there); frontend_latency_s per request on top, which occupies no queue
    (the hops between the API server and the engine core and back, paid once by a request's
    first token and by its last, so by its TTFT and its end-to-end latency alike);
    frontend_prompt_token_s per prompt token on top of frontend_s, and frontend_output_token_s
    of the API server's event loop per streamed token, which stretches frontend_s as the
    run's token rate loads the loop (sim/frontend.py: the serial time a run's requests pay)."""

    weights_bytes: int
    kv_bytes_per_token: int
    flops_per_token: int
    bandwidth_bytes_per_s: float
    flops_per_s: float
    step_overhead_s: float = 0.0
    swap_bandwidth_bytes_per_s: float = 25e9
    source: str = "roofline"
    attention_flops_per_token_pair: int = 0
    attention_flops_per_s: float = 0.0
    gemm_efficiency: float = 1.0
    attention_efficiency: float = 1.0
    bandwidth_efficiency: float = 1.0
    layer_overhead_s: float = 0.0
    num_layers: int = 0
    moe_expert_bytes: int = 0
    moe_flops_per_token: int = 0
    moe_gemm_efficiency: float = 1.0
    num_moe_layers: int = 0
    # linear-attention / Mamba state: read and written once per request per step, whatever
    # its context (ledger/state.py); 0 for pure attention models
    state_bytes_per_request: int = 0
    moe_layer_overhead_s: float = 0.0
    num_experts: int = 0
    experts_per_token: int = 0
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    expert_parallel_size: int = 1
    collective_bytes_per_token: float = 0.0
    collective_latency_s: float = 0.0
    collective_calls: int = 0
    collective_message_bytes_per_token: int = 0
    collective_table: str = ""
    collective_source: str = ""
    pipeline_bytes_per_token: float = 0.0
    pipeline_latency_s: float = 0.0
    interconnect_bytes_per_s: float = 450e9
    step_time_cv: float = 0.0
    efficiency_source: str = SPEED_OF_LIGHT
    cpu_step_s: float = 0.0
    cpu_per_seq_s: float = 0.0
    cpu_overlap: float = 0.0
    eager_layer_s: float = 0.0
    graph_max_tokens: int = 0
    graph_prefill: float = 1.0
    frontend_s: float = 0.0
    frontend_latency_s: float = 0.0
    frontend_prompt_token_s: float = 0.0
    frontend_output_token_s: float = 0.0
    host_link_bytes_per_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("bandwidth_bytes_per_s", "flops_per_s", "swap_bandwidth_bytes_per_s",
                     "interconnect_bytes_per_s"):
            if not getattr(self, name) > 0:
                raise SpecError(name, getattr(self, name), "must be > 0")
        for name in ("cpu_overlap", "graph_prefill"):
            if getattr(self, name) not in (0, 1):
                raise SpecError(name, getattr(self, name), "0 or 1")
        for name in ("gemm_efficiency", "attention_efficiency", "bandwidth_efficiency",
                     "moe_gemm_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise SpecError(name, getattr(self, name), "a share of peak in (0, 1]")
        for name in NON_NEGATIVE:
            if getattr(self, name) < 0:
                raise SpecError(name, getattr(self, name), "must be >= 0")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "expert_parallel_size"):
            if getattr(self, name) < 1:
                raise SpecError(name, getattr(self, name), "a whole number >= 1")
        if self.collective_table and self.collective_table not in TABLES:
            raise SpecError("collective_table", self.collective_table,
                            "one of " + ", ".join(sorted(TABLES)) + " or empty")
        if self.moe_flops_per_token > self.flops_per_token:
            raise SpecError("moe_flops_per_token", self.moe_flops_per_token,
                            f"at most flops_per_token ({self.flops_per_token:,})")
        if self.moe_expert_bytes > self.weights_bytes:
            raise SpecError("moe_expert_bytes", self.moe_expert_bytes,
                            f"at most weights_bytes ({self.weights_bytes:,})")


def coefficients(weights_bytes: int, kv_bytes_per_token: int, active_parameters: int,
                 bandwidth_bytes_per_s: float, flops_per_s: float,
                 step_overhead_s: float = 0.0) -> Coefficients:
    """FLOPs per token = 2 x active parameters (one multiply-add per weight; attention's
    context-dependent FLOPs are left out, a few percent at chat lengths). Every weight is read
    each iteration: right for dense models and for MoE once a batch touches every expert,
    pessimistic for a single MoE stream."""
    return Coefficients(weights_bytes, kv_bytes_per_token, 2 * active_parameters,
                        bandwidth_bytes_per_s, flops_per_s, step_overhead_s)


def coefficients_for_plan(plan: Plan, bandwidth_bytes_per_s: float, flops_per_s: float,
                          step_overhead_s: float = 0.0) -> Coefficients:
    """The ledger's weights (+ quantization metadata) and KV bytes per token, the model's
    active parameters, and the device's bandwidth and FLOPS."""
    weights = plan.line("weights") + plan.line("weight_metadata")
    base = coefficients(weights, plan.kv_bytes_per_token + plan.indexer_bytes_per_token,
                        plan.active_parameters, bandwidth_bytes_per_s, flops_per_s,
                        step_overhead_s)
    return replace(base, state_bytes_per_request=plan.state_bytes_per_request)


def iteration_s(coef: Coefficients, num_tokens: int, kv_tokens_read: int) -> float:
    """t = max(FLOPs / flops_per_s, bytes / bandwidth) + step overhead, where
    FLOPs = flops_per_token x tokens computed this iteration and
    bytes = weights (read once per iteration) + kv_bytes_per_token x (live tokens read + tokens
    written). Seconds. The tokens are priced as decode tokens attending to kv_tokens_read keys
    (step_model.step_s has prefill and decode apart)."""
    return step_s(coef, 0, num_tokens, 0, kv_tokens_read)


def decode_bound_tokens_per_s(coef: Coefficients) -> float:
    """One stream's ceiling: 1 / the step the simulation prices for one decode token with no
    context. On the bare roofline that is bandwidth / weights bytes (seed 004: 14 GB at
    2,000 GB/s -> ~143 tokens/s; 8-bit weights -> ~286); a fitted or calibrated step model's
    efficiencies and overheads lower it as they lower every simulated step."""
    return 1 / iteration_s(coef, num_tokens=1, kv_tokens_read=0)


def swap_s(coef: Coefficients, num_tokens: int) -> float:
    """Moving num_tokens of KV across the host link, seconds."""
    return coef.kv_bytes_per_token * num_tokens / coef.swap_bandwidth_bytes_per_s


def reload_s(coef: Coefficients, num_tokens: int) -> float:
    """Loading num_tokens of KV back from a host offload tier over the host link, seconds."""
    link = coef.host_link_bytes_per_s or coef.swap_bandwidth_bytes_per_s
    return coef.kv_bytes_per_token * num_tokens / link


def override(coef: Coefficients, values: dict, source: str) -> Coefficients:
    """Replace coefficients by name (a measured coefficients file); unknown names are errors.
    The labels (LABELS: which sources and which all-reduce table priced them) are the
    deployment's, not the file's: a report fed back keeps them and they are skipped."""
    names = {f.name for f in fields(Coefficients)} - LABELS
    values = {k: v for k, v in values.items() if k not in LABELS}
    for key, value in values.items():
        if key not in names:
            raise SpecError(key, value, "unknown coefficient; allowed: " + ", ".join(sorted(names)))
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise SpecError(key, value, "a finite number")
    clean = {k: int(v) if k in INTS else float(v) for k, v in values.items()}
    return replace(coef, **clean, source=source)


def as_dict(coef: Coefficients) -> dict:
    return asdict(coef)
