"""A Scenario's expert-parallel load balancing (vLLM's --enable-eplb, --eplb-config) as the
ledger's EplbSpec: the redundant experts over the expert-parallel group, under the rules of the
release the plan follows."""

from servecap.ledger.eplb import DEFAULT_WINDOW, EplbSpec
from servecap.ledger.errors import SpecError

from .lora import release
from .spec import Scenario


def eplb_spec(scenario: Scenario) -> EplbSpec | None:
    """None without --enable-eplb; vLLM's own rules otherwise: EPLB needs expert parallelism
    (ParallelConfig: 'enable_expert_parallel must be True to use EPLB'), and redundant experts
    need EPLB."""
    par = scenario.parallel
    if not par.enable_eplb:
        if par.num_redundant_experts:
            raise SpecError("num_redundant_experts", par.num_redundant_experts, "needs "
                            "--enable-eplb (vLLM refuses redundant experts without it)")
        return None
    if not par.enable_expert_parallel:
        raise SpecError("--enable-eplb", True, "needs --enable-expert-parallel (vLLM: "
                        "'enable_expert_parallel must be True to use EPLB')")
    return EplbSpec(num_redundant_experts=par.num_redundant_experts,
                    ep_size=par.tensor_parallel_size * par.data_parallel_size,
                    window_size=par.eplb_window_size or DEFAULT_WINDOW,
                    release=release(scenario))
