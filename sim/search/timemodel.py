"""The one place a layout's tensor and pipeline parallelism reach the simulator's time model."""

from servecap.ledger.devices import find
from servecap.ledger.ranks import Deployment
from servecap.sim.roofline import Coefficients, coefficients

# Said beside every result priced with tp or pp > 1, so no figure hides what is not priced.
TP_NOTE = ("tp > 1 priced from the binding rank: its weight and KV bytes, FLOPs / tp; "
           "all-reduce collectives are not priced yet (optimistic)")
PP_NOTE = ("pp > 1 priced as stages run one after another (each iteration crosses every "
           "stage, no micro-batch overlap: throughput understated); send/recv not priced")


def parallel_coefficients(deployment: Deployment, device_name: str,
                          step_overhead_s: float) -> tuple[Coefficients, tuple[str, ...]]:
    """Iteration coefficients of one replica of tp x pp GPUs, and the notes on what is not
    priced. A rank computes 1/tp of each layer's FLOPs and reads its own shard of weights and
    KV (the binding rank's ledger); an iteration crosses the pp stages one after another,
    so each coefficient is pp x the binding stage's. t = max(FLOPs / flops_per_s,
    bytes / bandwidth) + overhead per iteration, as in roofline.iteration_s.
    When the simulator prices tp and pp itself, only this function changes."""
    device = find(device_name)
    tp = deployment.parallel.tensor_parallel_size
    pp = deployment.parallel.pipeline_parallel_size
    plan = deployment.plan
    weights = plan.line("weights") + plan.line("weight_metadata")
    coef = coefficients(pp * weights, pp * plan.kv_bytes_per_token,
                        -(-plan.active_parameters // tp), device.bandwidth_bytes_per_s,
                        device.bf16_flops_per_s, step_overhead_s)
    notes = (TP_NOTE,) * (tp > 1) + (PP_NOTE,) * (pp > 1)
    return coef, notes
