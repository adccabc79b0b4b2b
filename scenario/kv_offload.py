"""A Scenario's host KV tier (vLLM's --kv-offloading-size, --kv-offloading-backend) as the
ledger's OffloadSpec, under the rules of the vLLM release the plan follows."""

from servecap.ledger.engines import PLAIN, VLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.kv_offload import TIERS, OffloadSpec
from servecap.ledger.model import ModelSpec

from .engine import implied_engine
from .lora import release
from .spec import Scenario


def offload_spec(scenario: Scenario, spec: ModelSpec) -> OffloadSpec | None:
    """None without --kv-offloading-size. The backend alone is an error (vLLM turns offloading
    on only with a size, and a plan that drops it answers another question)."""
    mem, par = scenario.memory, scenario.parallel
    backend = mem.kv_offloading_backend
    if backend is not None and backend not in TIERS:
        raise SpecError("--kv-offloading-backend", backend, " or ".join(TIERS))
    if mem.kv_offloading_size is None:
        if backend is not None:
            raise SpecError("--kv-offloading-backend", backend, "applies with "
                            "--kv-offloading-size GiB (vLLM offloads only with a size)")
        return None
    engine = implied_engine(scenario)
    if engine not in (PLAIN, VLLM):
        raise SpecError("--kv-offloading-size", mem.kv_offloading_size, f"a vLLM flag "
                        f"(--engine vllm), not {engine}'s")
    tp, pp = par.tensor_parallel_size, par.pipeline_parallel_size
    # vLLM's replicated_layout: an MLA latent is the same on every rank of a tp-only group
    replicated = spec.has_architecture and spec.attention.kind == "mla" and tp > 1 \
        and pp == 1 and par.nnodes == 1
    return OffloadSpec(size_gib=float(mem.kv_offloading_size), backend=backend or "native",
                       world_size=tp * pp, release=release(scenario), replicated=replicated)
