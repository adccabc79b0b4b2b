"""Measured all-reduce times by message size, per device and GPU count: published tables, and
the kernel vLLM sends each message size to."""

import math
from dataclasses import dataclass

from .units import KiB, MiB

FIXTURES = "tests/fixtures/collectives/"
# vLLM's custom all-reduce takes messages below max_size = 8192 x 1024 bytes, on 2, 4, 6 or
# 8 GPUs of one node (more than 2 only fully NVLink-connected); everything else goes to NCCL
# (vllm/distributed/device_communicators/custom_all_reduce.py, tests/fixtures/collectives/
# SOURCE.md)
CUSTOM_AR_MAX_BYTES = 8192 * 1024
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)


@dataclass(frozen=True)
class Path:
    """One kernel's measured (message bytes, seconds) rows, copied from `column` of the
    table's fixture; vLLM sends it the messages below below_bytes (and not below the previous
    path's)."""

    kernel: str
    column: str
    below_bytes: float
    points: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Table:
    """A published table of one all-reduce per message size, on tensor_parallel_size GPUs of
    one of `devices`, with the paths vLLM takes through it."""

    key: str
    devices: tuple[str, ...]
    tensor_parallel_size: int
    source: str
    fixture: str
    paths: tuple[Path, ...]

    def label(self) -> str:
        return f"measured: {self.source} ({FIXTURES}{self.fixture})"


def _rows(times_ms: tuple[float, ...], sizes_mib=(0.5, 1.0, 1.5, 2.0, 3.0, 4.0)):
    """(bytes, seconds) from a table's 'Tensor Size' in MB (2^20 bytes) and its ms column."""
    return tuple((int(mib * MiB), ms / 1000) for mib, ms in zip(sizes_mib, times_ms,
                                                                  strict=True))


# vLLM PR #24111's H100 TP=4 table (CUDA graph). At 4 GPUs vLLM's custom all-reduce runs its
# one-stage kernel below 512 KiB and its two-stage kernel from there to max_size
# (csrc/custom_all_reduce.cuh); below 512 KiB only the 0.5 MiB one-stage row is measured, an
# upper bound of the smaller messages (no all-reduce gets faster with more bytes). The H200
# takes the same table: the same SM 9.0 chip on the same NVLink 4 / NVSwitch board.
H100_TP4 = Table(
    key="h100-sxm-tp4-vllm-pr24111",
    devices=("h100-80gb", "h200-141gb"),
    tensor_parallel_size=4,
    source="vLLM PR #24111, vLLM's custom all-reduce and NCCL on 4 x H100 SXM, NVLink 4, "
           "CUDA graph",
    fixture="vllm_pr24111_h100_tp4.txt",
    paths=(
        Path("custom all-reduce, one-stage", "ca_1stage", 512 * KiB, _rows((0.010,), (0.5,))),
        Path("custom all-reduce, two-stage", "ca_2stage", CUSTOM_AR_MAX_BYTES,
             _rows((0.017, 0.018, 0.027, 0.027, 0.035, 0.043))),
        Path("NCCL", "pynccl", math.inf, _rows((0.017, 0.019, 0.022, 0.026, 0.031, 0.037))),
    ))
TABLES = {table.key: table for table in (H100_TP4,)}


def table_for(device_name: str, tensor_parallel_size: int) -> Table | None:
    """The measured table that prices this device's all-reduces at this GPU count; None:
    nothing published was found (the ring estimate of ledger/devices.py stays)."""
    for table in TABLES.values():
        if device_name in table.devices and table.tensor_parallel_size == tensor_parallel_size:
            return table
    return None


def path_for(table: Table, num_bytes: float) -> Path:
    """The kernel vLLM sends a message of num_bytes to."""
    for path in table.paths:
        if num_bytes < path.below_bytes:
            return path
    return table.paths[-1]


def interpolate(points: tuple[tuple[int, float], ...], num_bytes: float) -> float:
    """Seconds for num_bytes from measured (bytes, seconds) rows: the row itself at a
    measured size; log-log between two rows; below the first row, the first row's time (a
    ceiling: smaller messages are no slower); above the last, the last two rows' slope
    carried on linearly in bytes (the bandwidth-bound regime)."""
    if num_bytes <= points[0][0]:
        return points[0][1]
    for (b0, t0), (b1, t1) in zip(points, points[1:], strict=False):
        if num_bytes <= b1:
            share = math.log(num_bytes / b0) / math.log(b1 / b0)
            return math.exp(math.log(t0) + share * (math.log(t1) - math.log(t0)))
    if len(points) == 1:
        return points[0][1]
    (b0, t0), (b1, t1) = points[-2], points[-1]
    return t1 + (num_bytes - b1) * max(t1 - t0, 0.0) / (b1 - b0)


def allreduce_s(key: str, num_bytes: float) -> float:
    """One all-reduce of num_bytes on the table `key`: the measured time of the kernel vLLM
    picks at that size. 0 for an empty message."""
    if num_bytes <= 0:
        return 0.0
    table = TABLES[key]
    return interpolate(path_for(table, num_bytes).points, num_bytes)
