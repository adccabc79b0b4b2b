"""Deployments: one engine, replicas behind a router, or disaggregated prefill/decode pools."""

from dataclasses import dataclass

from servecap.ledger.errors import SpecError

from .cluster import ROUTERS, disaggregated_summary, simulate_disaggregated, simulate_replicas
from .config import SchedulerConfig
from .metrics import SLO, summarize
from .roofline import Coefficients
from .run import simulate
from .sampling import Request
from .state import Seq, SimResult

MAX_DEVICES = 4096  # each is a simulated engine; more only slows the run down


@dataclass(frozen=True)
class Deployment:
    """`replicas` identical engines behind `router`; or, with prefill_replicas and
    decode_replicas, separate pools joined by a KV link of kv_transfer_bytes_per_s (then a
    colocated deployment with the same device count is run beside it)."""

    replicas: int = 1
    router: str = "least-tokens"
    prefill_replicas: int = 0
    decode_replicas: int = 0
    kv_transfer_bytes_per_s: float = 50e9

    def __post_init__(self) -> None:
        for name in ("replicas", "prefill_replicas", "decode_replicas"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value <= MAX_DEVICES:
                raise SpecError(name, value, f"a whole number of devices, at most "
                                f"{MAX_DEVICES:,}")
        if self.replicas < 1:
            raise SpecError("replicas", self.replicas, "a whole number >= 1")
        if (self.prefill_replicas > 0) != (self.decode_replicas > 0):
            raise SpecError("disaggregate", f"{self.prefill_replicas}:{self.decode_replicas}",
                            "both pools need at least one device, e.g. 1:1")
        if self.router not in ROUTERS:
            raise SpecError("router", self.router, "one of " + ", ".join(ROUTERS))

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def label(self) -> str:
        if self.disaggregated:
            return (f"disaggregated {self.prefill_replicas}P+{self.decode_replicas}D, "
                    f"{self.router}")
        return "1 device" if self.replicas == 1 else f"colocated x{self.replicas}, {self.router}"


@dataclass(frozen=True)
class Outcome:
    """One policy on one deployment: every request's final state, the engines whose token
    timelines those states refer to, and the summary."""

    deployment: str
    seqs: list[Seq]
    results: list[SimResult]
    summary: dict


def run_deployment(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
                   num_blocks: int, deployment: Deployment, slo: SLO) -> list[Outcome]:
    if deployment.disaggregated:
        devices = deployment.prefill_replicas + deployment.decode_replicas
        colocated = Deployment(devices, deployment.router)
        return [*run_deployment(requests, coef, config, num_blocks, colocated, slo),
                _disaggregated(requests, coef, config, num_blocks, deployment, slo)]
    if deployment.replicas == 1:
        results = [simulate(requests, coef, config, num_blocks)]
    else:
        results = simulate_replicas(requests, coef, config, num_blocks, deployment.replicas,
                                    deployment.router)
    seqs = sorted((s for r in results for s in r.seqs), key=lambda s: s.req.arrival_s)
    return [Outcome(deployment.label, seqs, results, summarize(results, slo))]


def _disaggregated(requests, coef, config, num_blocks, deployment, slo) -> Outcome:
    _, final, decode = simulate_disaggregated(
        requests, coef, config, num_blocks, deployment.prefill_replicas,
        deployment.decode_replicas, deployment.kv_transfer_bytes_per_s, deployment.router)
    return Outcome(deployment.label, final, decode,
                   disaggregated_summary(final, decode, config.policy, slo))
