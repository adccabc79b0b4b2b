"""One ledger line: a named amount of device memory in int bytes and where it came from."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    """One ledger line: int bytes and the inputs that produced it ('from')."""

    key: str
    label: str
    num_bytes: int
    source: str
    measured: bool = False
