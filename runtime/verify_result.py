"""What a verification is given and what it returns: options, one rank's result, every rank's."""

from dataclasses import dataclass, field

from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.verification import Failure, Measured, Reconciliation

from .sequence import Arrival
from .telemetry import Snapshot


@dataclass(frozen=True)
class VerifyOptions:
    """device: cpu | cuda | cuda:N; device_bytes: --device-memory (None: the whole GPU).
    workload: arrivals of the declared load (default: concurrency requests of the context)."""

    device: str = "cpu"
    device_bytes: int | None = None
    seed: int = 0
    output_tokens: int = 16
    workload: tuple[Arrival, ...] = ()
    workload_name: str = ""
    realtime: bool = False
    reserve_full_context: bool = True  # False: vLLM's optimistic admission; growth preempts
    weights_dir: str | None = None
    config_path: str | None = None
    probe_ceiling: bool = True  # False: --no-probe, the ceiling is not measured
    starve: tuple[int, str] | None = None  # (rank, phase): no room for transients there (CPU)


@dataclass(frozen=True)
class VerifyResult:
    spec: ModelSpec
    plan: Plan
    measured: Measured
    reconciliation: Reconciliation
    phases: tuple[Snapshot, ...]
    latency: dict
    record: dict
    calibration: dict = field(default_factory=dict)
    notes: tuple[str, ...] = field(default_factory=tuple)
    probe: dict = field(default_factory=dict)  # the ceiling probe: count, resident, limited_by
    records: tuple = ()  # the declared load's RequestRecords (for --records / --token-times)


class RankFailure(Exception):
    """A failure on one rank under tensor parallelism: the rank stops and its peers with it."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


@dataclass(frozen=True)
class ParallelResult:
    """Every rank's verification (one entry without tensor parallelism) and the binding one."""

    ranks: tuple[VerifyResult, ...]
    binding_rank: int = 0
    failures: tuple[Failure, ...] = ()  # ranks that failed (then `ranks` is empty)
    size: int = 0  # ranks started (0: len(ranks))
    spec: ModelSpec | None = None  # the model and deployment, for a workbook of the failure
    serve: ServeSpec | None = None

    @property
    def tensor_parallel_size(self) -> int:
        return self.size or len(self.ranks)

    @property
    def binding(self) -> VerifyResult:
        return self.ranks[self.binding_rank]


def binding_rank(results: list[VerifyResult]) -> int:
    """The rank with the least headroom left at its peak (ties: the lowest rank)."""
    def headroom(result: VerifyResult) -> int:
        return next(c.measured_bytes for c in result.reconciliation.lines if c.line == "safety")
    return min(range(len(results)), key=lambda r: (headroom(results[r]), r))
