"""The one place a search's layouts reach the simulator's time model: its own per-rank step
model (sim/rank_model.py), the same one `simulate -tp/-pp` prices with."""

from servecap.ledger.devices import find
from servecap.ledger.model import ModelSpec
from servecap.ledger.ranks import Deployment
from servecap.ledger.vllm_versions import VllmRow
from servecap.sim.efficiency import for_device
from servecap.sim.rank_model import rank_coefficients
from servecap.sim.roofline import Coefficients
from servecap.sim.vllm_engine import with_release


def parallel_coefficients(spec: ModelSpec, deployment: Deployment, device_name: str,
                          step_overhead_s: float, expert_parallel: bool = False,
                          engine: VllmRow | None = None) -> tuple[Coefficients, tuple[str, ...]]:
    """Step-model coefficients of one replica of tp x pp GPUs, as `simulate` builds them: the
    binding stage's rank (its weight and KV bytes, its share of the FLOPs and attention, the
    ring all-reduces and pipeline sends over the device's interconnect), at the weights'
    dtype's GEMM peak and the device's measured efficiency table (speed of light where the
    catalog has none); expert_parallel turns each MoE layer's second all-reduce into an
    all-to-all; engine: a vLLM release's host, CUDA-graph and API-server terms on top
    (sim/vllm_engine.py, as `simulate --engine` adds them; None: none). Also the notes that
    say which table and which release priced it."""
    device = find(device_name)
    weight_dtype = deployment.plan.serve.weight_dtype
    measured = for_device(device.name)
    coef = rank_coefficients(spec, deployment, device.bandwidth_bytes_per_s,
                             device.flops_per_s(weight_dtype), step_overhead_s, device,
                             measured, expert_parallel)
    # simulate's own labels for the same step model, so the two commands name it alike
    notes = (f"step model on {device.name}: {coef.efficiency_source}",)
    if engine is None:
        return coef, notes + ("engine: plain, no release's terms",)
    coef = with_release(coef, engine)
    return coef, notes + (f"engine {engine.pin}: host {coef.cpu_step_s * 1e6:g} us/step + "
                          f"{coef.cpu_per_seq_s * 1e6:g} us/sequence, CUDA graphs up to "
                          f"{coef.graph_max_tokens} tokens, API server "
                          f"{coef.frontend_s * 1e3:g} ms/request serial + "
                          f"{coef.frontend_latency_s * 1e3:g} ms latency",)
