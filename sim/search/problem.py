"""The question a search answers: model, workload at a rate, SLOs, prices and limits, frozen."""

from dataclasses import dataclass, replace

from servecap.ledger.model import ModelSpec
from servecap.ledger.serve import DEFAULT_BLOCK_SIZE_TOKENS
from servecap.ledger.vllm_versions import NEWEST, VllmRow
from servecap.ledger.weights import default_quant
from servecap.sim.metrics import SLO
from servecap.sim.workload import Workload


@dataclass(frozen=True)
class Problem:
    """Everything a worker needs to price one candidate; picklable (sent to each worker).
    context_tokens is the max_model_len every layout must hold one whole request of.
    safety_fraction is the share of the device kept back (vLLM's 1 - gpu_memory_utilization;
    by default the newest vLLM release's, as `plan --engine vllm` plans it). engine: the vLLM
    release whose host, CUDA-graph and API-server terms each step pays, as `simulate
    --engine` prices them, and whose memory rules plan each layout (None: plain, the
    device's step model alone, planned with the newest release's rules)."""

    spec: ModelSpec
    checkpoint_weight_dtype: str
    workload: Workload
    rate_per_s: float
    slo: SLO
    target_attainment: float = 0.9
    context_tokens: int = 8192
    policy: str = "chunked-prefill"
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS
    step_overhead_s: float = 0.0
    kv_transfer_bytes_per_s: float = 50e9
    router: str = "least-tokens"
    safety_fraction: float = round(1 - NEWEST.default_gpu_memory_utilization, 6)
    capacity: bool = True
    engine: VllmRow | None = None

    @property
    def memory_row(self) -> VllmRow:
        """The vLLM release whose memory rules plan each layout."""
        return self.engine or NEWEST

    def spec_for(self, weight_dtype: str) -> ModelSpec:
        """The checkpoint as is, or re-quantized to weight_dtype (as --weight-dtype does)."""
        if weight_dtype == self.checkpoint_weight_dtype:
            return self.spec
        return replace(self.spec, quant=default_quant(weight_dtype))
