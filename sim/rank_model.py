"""Coefficients for one rank of a tensor/pipeline-parallel deployment, from plan's own ledger."""

from dataclasses import replace

from servecap.ledger.collectives import table_for
from servecap.ledger.devices import Device
from servecap.ledger.model import ModelSpec
from servecap.ledger.ranks import Deployment
from servecap.ledger.sharding import Stage, rank_parameters

from .efficiency import Efficiency
from .roofline import Coefficients, coefficients_for_plan

ACTIVATION_BYTES = 2  # bf16 activations cross the link in all-reduces and pipeline sends


def attention_flops_per_token_pair(spec: ModelSpec, layers: int, tp: int) -> int:
    """FLOPs one (query, key) pair costs on one rank: QK^T and PV, 2 FLOPs per multiply-add
    each, per query head on the rank: 4 x layers x (heads / tp) x head_dim."""
    att = spec.attention
    return 4 * layers * (att.num_heads // tp) * att.head_dim


def rank_coefficients(spec: ModelSpec, deployment: Deployment, bandwidth_bytes_per_s: float,
                      flops_per_s: float, step_overhead_s: float = 0.0,
                      device: Device | None = None, efficiency: Efficiency | None = None,
                      expert_parallel: bool = False) -> Coefficients:
    """The binding stage's rank: its ledger weights and KV bytes per token, its share of the
    active parameters (2 FLOPs each per token), its layers' attention and routed experts, the
    tensor-parallel all-reduces (two per layer: after attention and after the MLP) and the
    pipeline hops, priced on the device's interconnect. expert_parallel (vLLM's
    --enable-expert-parallel): the tp ranks hold whole experts instead of slices of each (the
    same bytes per rank when tp divides the experts) and each MoE layer's all-reduce becomes
    an all-to-all dispatch and combine of every token's top-k activations."""
    item = deployment.stages[deployment.binding]
    plan, par = item.plan, deployment.parallel
    moe_layers = _moe_layers(spec, item.stage.layers) if expert_parallel else 0
    tp, pp = par.tensor_parallel_size, par.pipeline_parallel_size
    base = coefficients_for_plan(plan, bandwidth_bytes_per_s, flops_per_s, step_overhead_s)
    stage = item.stage if pp > 1 else None
    layers = len(item.stage.layers)
    coef = replace(base, num_layers=layers, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                   num_moe_layers=_moe_layers(spec, item.stage.layers),
                   attention_flops_per_token_pair=attention_flops_per_token_pair(spec, layers,
                                                                                 tp),
                   **_experts(spec, tp, stage, base),
                   **_links(spec, layers, tp, pp, device, moe_layers))
    if device is not None and device.bf16_flops_per_s and flops_per_s != device.bf16_flops_per_s:
        coef = replace(coef, attention_flops_per_s=float(device.bf16_flops_per_s))
    return coef if efficiency is None else efficiency.apply(coef, plan.serve.weight_dtype)


def _experts(spec: ModelSpec, tp: int, stage: Stage | None, base: Coefficients) -> dict:
    """Per-rank FLOPs per token and the routed experts' share of the weights read."""
    if tp == 1 and stage is None and (spec.moe is None or not spec.has_architecture):
        return {}
    total, experts = rank_parameters(spec, tp, stage)
    out = {}
    if spec.moe is not None and total:
        moe = spec.moe
        idle = experts * (1 - moe.num_experts_per_tok / moe.num_experts)
        out.update(moe_expert_bytes=int(base.weights_bytes * experts / total),
                   num_experts=moe.num_experts, experts_per_token=moe.num_experts_per_tok,
                   moe_flops_per_token=int(2 * (experts - idle)))
        active = total - idle
    else:
        active = total
    if tp > 1 or stage is not None:
        out["flops_per_token"] = int(2 * active)
    return out


def _moe_layers(spec: ModelSpec, layers: tuple[int, ...]) -> int:
    if spec.moe is None or not spec.has_architecture:
        return 0
    return sum(1 for layer in layers if layer not in spec.moe.dense_layers)


def _links(spec: ModelSpec, layers: int, tp: int, pp: int, device: Device | None,
           moe_layers: int = 0) -> dict:
    """Two all-reduces per layer of hidden x 2 bytes per token in the step (after attention
    and after the MLP): priced by the measured table of the device at this GPU count where
    one exists (ledger/collectives.py: collective_calls all-reduces of the step's message),
    else by the ring estimate, 2(n-1)/n x bytes / link and 2(n-1) latency steps each (folded
    into collective_bytes_per_token and collective_latency_s). Under expert parallelism a MoE
    layer's second all-reduce is an all-to-all instead: each token's activations go to its
    top-k experts and come back, (n-1)/n of them off-rank, 2 x k x (n-1)/n x bytes, in 2(n-1)
    latency steps (an estimate on every device)."""
    if device is None or (tp == 1 and pp == 1):
        return {}
    out = {"interconnect_bytes_per_s": float(device.interconnect_bytes_per_s)}
    per_token = spec.hidden_size * ACTIVATION_BYTES
    if tp > 1:
        reduces = 2 * layers - moe_layers
        top_k = spec.moe.num_experts_per_tok if moe_layers else 0
        table = table_for(device.name, tp)
        ring_reduces = 0 if table else reduces
        out["collective_bytes_per_token"] = (ring_reduces * 2 + moe_layers * 2 * top_k) \
            * (tp - 1) / tp * per_token
        out["collective_latency_s"] = (ring_reduces + moe_layers) * 2 * (tp - 1) \
            * device.interconnect_latency_s
        out["expert_parallel_size"] = tp if moe_layers else 1
        out["collective_message_bytes_per_token"] = per_token
        out["collective_calls"] = reduces if table else 0
        out["collective_table"] = table.key if table else ""
        out["collective_source"] = table.label() if table else _estimate_label(device, tp)
    if pp > 1:
        out["pipeline_bytes_per_token"] = float(per_token)
        out["pipeline_latency_s"] = device.p2p_latency_s
    return out


def _estimate_label(device: Device, tp: int) -> str:
    return (f"estimate: no measured all-reduce table for {device.name} at tp {tp}; ring of "
            f"2(n-1) steps x {device.interconnect_latency_s * 1e6:g} us over "
            f"{device.interconnect} at {device.interconnect_bytes_per_s / 1e9:g} GB/s")
