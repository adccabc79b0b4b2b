"""A reconciliation's rows: one compared figure each, predicted beside logged, and the whole
(rows, notes, the lines read, whether the plan agrees)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One compared figure. unit: 'GiB' (values in bytes), 'blocks', 'tokens' or 'x'."""

    key: str
    label: str
    unit: str
    predicted: float
    logged: float
    advice: str

    @property
    def residual(self) -> float:
        """logged - predicted, in the row's unit (bytes for GiB rows)."""
        return self.logged - self.predicted


@dataclass(frozen=True)
class Reconciliation:
    """The rows, the notes, every memory line of the log that was read (with what it gave),
    and whether the plan agrees with the log (exit 0) or not (exit 1)."""

    model: str
    engine_version: str
    rows: tuple[Row, ...]
    notes: tuple[str, ...]
    lines: tuple = ()
    agrees: bool = True
