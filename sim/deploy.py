"""Deployments: one engine, replicas behind a router, or disaggregated prefill/decode pools."""

from dataclasses import dataclass, replace

import numpy as np

from servecap.ledger.errors import SpecError

from .cluster import ROUTERS, simulate_disaggregated, simulate_replicas
from .columns import RequestColumns
from .config import SchedulerConfig
from .frontend import with_api_server
from .gcpause import paused
from .measure import Run, measure
from .metrics import SLO
from .roofline import Coefficients
from .run import simulate
from .sampling import Request
from .state import Seq, SimResult

MAX_DEVICES = 4096  # each is a simulated engine; more only slows the run down
MAX_SEEDS = 64  # step-time draws per run: the interval narrows as 1/sqrt of them


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
                if name == "replicas":
                    raise SpecError("--replicas", value,
                                    f"a whole number of devices, at most {MAX_DEVICES:,}")
                raise SpecError("--disaggregate", f"{self.prefill_replicas}:"
                                f"{self.decode_replicas}", "prefill:decode device counts, each "
                                f"at most {MAX_DEVICES:,}")
        if self.replicas < 1:
            raise SpecError("--replicas", self.replicas, "a whole number >= 1")
        if (self.prefill_replicas > 0) != (self.decode_replicas > 0):
            raise SpecError("--disaggregate", f"{self.prefill_replicas}:{self.decode_replicas}",
                            "both pools need at least one device, e.g. 1:1")
        if self.router not in ROUTERS:
            raise SpecError("--router", self.router, "one of " + ", ".join(ROUTERS))

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
    columns: RequestColumns | None = None  # seqs' columns, where measuring had them


def run_deployment(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
                   num_blocks: int, deployment: Deployment, slo: SLO, num_seeds: int = 1,
                   window: bool = True, itl: bool = True) -> list[Outcome]:
    """The deployment's outcome (a disaggregated one after its colocated twin on as many
    devices). With num_seeds > 1 and a step-time spread, the run is repeated with step-time
    seeds config.seed, +1, ...: the summary pools every run (sim/measure.py), the outcome's
    requests are the first run's. window=False measures every request, not the window. The
    API server's serial time per request is the run's, at its load (sim/frontend.py)."""
    with paused():  # sim/gcpause.py
        return _run_deployment(requests, coef, config, num_blocks, deployment, slo,
                               num_seeds, window, itl)


def _run_deployment(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
                    num_blocks: int, deployment: Deployment, slo: SLO, num_seeds: int,
                    window: bool, itl: bool) -> list[Outcome]:
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, int) \
            or not 1 <= num_seeds <= MAX_SEEDS:
        raise SpecError("--seeds", num_seeds, f"a whole number in 1..{MAX_SEEDS}")
    coef = with_api_server(coef, requests, config, deployment.replicas)[0]
    deployments = [Deployment(deployment.prefill_replicas + deployment.decode_replicas,
                              deployment.router), deployment] \
        if deployment.disaggregated else [deployment]
    out = []
    for dep in deployments:
        runs = [run_once(requests, coef, replace(config, seed=config.seed + i), num_blocks,
                         dep) for i in range(seeds_needed(coef, num_seeds))]
        columns = [RequestColumns(r.seqs) if r.columns is None else r.columns for r in runs]
        summary = measure(config.policy, runs, slo, itl, window, columns)
        summary["not_arrived"] = sum(len(r.seqs) - r.num_arrived for run in runs
                                     for r in run.results if not dep.disaggregated)
        summary["num_iterations"] = sum(r.num_iterations for run in runs for r in run.results)
        # every request of the first run in arrival order: its measured list itself where
        # every request arrived (that list is the same requests, ordered the same way)
        every = runs[0].seqs if dep.disaggregated or all(
            r.num_arrived == len(r.seqs) for r in runs[0].results) else \
            by_arrival([s for r in runs[0].results for s in r.seqs])
        out.append(Outcome(dep.label, every, runs[0].results, summary,
                           columns[0] if every is runs[0].seqs else None))
    return out


def seeds_needed(coef: Coefficients, num_seeds: int) -> int:
    """Step-time seeds change nothing without a spread: one run then."""
    return num_seeds if coef.step_time_cv else 1


def run_once(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
             num_blocks: int, deployment: Deployment) -> Run:
    """Exactly this deployment (no colocated twin): every arrived request in arrival order,
    and the engines whose timelines they index (a disaggregated one's decode pool)."""
    if deployment.disaggregated:
        _, final, decode = simulate_disaggregated(
            requests, coef, config, num_blocks, deployment.prefill_replicas,
            deployment.decode_replicas, deployment.kv_transfer_bytes_per_s, deployment.router)
        return Run(sorted(final, key=_arrival), decode)
    if deployment.replicas == 1:
        results = [simulate(requests, coef, config, num_blocks)]
    else:
        results = simulate_replicas(requests, coef, config, num_blocks, deployment.replicas,
                                    deployment.router)
    seqs = [s for r in results for s in r.seqs[:r.num_arrived]]
    columns = RequestColumns(seqs)  # the report reads them; their arrivals say the order
    ordered = by_arrival(seqs, columns.arrival)
    return Run(ordered, results, columns if ordered is seqs else None)


def _arrival(seq: Seq) -> tuple[float, int]:
    return seq.req.arrival_s, seq.req.request_id


def by_arrival(seqs: list[Seq], arrival: np.ndarray | None = None) -> list[Seq]:
    """sorted(seqs, key=_arrival); the list itself when it is already in that order (one
    engine's requests are, as drawn), which a look at the arrival times says in a fraction
    of the sort's time (a stable sort leaves requests in order where it finds them so).
    arrival: the requests' arrival column, where the caller has it."""
    if arrival is None:
        arrival = np.array([s.req.arrival_s for s in seqs], dtype=np.float64)
    step = np.diff(arrival)
    if not (step >= 0).all():
        return sorted(seqs, key=_arrival)
    for i in np.flatnonzero(step == 0).tolist():  # same arrival: by request id
        if seqs[i].req.request_id > seqs[i + 1].req.request_id:
            return sorted(seqs, key=_arrival)
    return seqs
