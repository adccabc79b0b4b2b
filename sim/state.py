"""Per-request simulation state and the timestamps every metric is computed from."""

from array import array
from dataclasses import dataclass, field

from . import seq as _seq_python
from .config import SchedulerConfig
from .roofline import Coefficients
from .seq import DONE, REJECTED, RUNNING, WAITING  # noqa: F401 (the states, named here too)
from .stamp import compiled

# a request's state: the compiled class (servecap.sim._seq_c: its fields in C, read by the
# compiled kernels without a lookup) where the build made it from sim/seq.py as it is, else
# that source as Python (a class with slots); the same fields, the same values
COMPILED_SEQ = compiled("seq")
Seq = (COMPILED_SEQ or _seq_python).Seq
request_columns = (COMPILED_SEQ or _seq_python).request_columns  # one pass, in C compiled
segment_columns = (COMPILED_SEQ or _seq_python).segment_columns


class KvSamples:
    """Each iteration's KV sample, (start time s, logical KV tokens, blocks in use), kept as
    three columns (C doubles and 64-bit integers) rather than a tuple and three objects per
    iteration: a run of a million iterations builds, reads and frees them at a fraction of
    the cost. It reads as the list of tuples it stands for (len, iteration, an index or a
    slice give the same floats and integers), and sums or searches run on the columns."""

    __slots__ = ("times", "tokens", "blocks")

    def __init__(self, samples=()) -> None:
        self.times, self.tokens, self.blocks = array("d"), array("q"), array("q")
        for sample in samples:
            self.append(sample)

    def append(self, sample: tuple[float, int, int]) -> None:
        time_s, tokens, blocks = sample
        self.times.append(time_s)
        self.tokens.append(tokens)
        self.blocks.append(blocks)

    def __len__(self) -> int:
        return len(self.times)

    def __iter__(self):
        return zip(self.times, self.tokens, self.blocks, strict=True)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(zip(self.times[index], self.tokens[index], self.blocks[index],
                            strict=True))
        return self.times[index], self.tokens[index], self.blocks[index]

    def __getstate__(self):
        return self.times, self.tokens, self.blocks

    def __setstate__(self, state) -> None:
        self.times, self.tokens, self.blocks = state


def kv_columns(samples) -> tuple:
    """(times, tokens, blocks) of KV samples: a KvSamples' own columns, else a list of
    (time, tokens, blocks) tuples split (a measured server's scrape, load/steady.py)."""
    if isinstance(samples, KvSamples):
        return samples.times, samples.tokens, samples.blocks
    return [t for t, _, _ in samples], [n for _, n, _ in samples], [b for _, _, b in samples]


@dataclass
class SimResult:
    """Everything one run produced: the requests' states and the engine's timelines."""

    policy: str
    config: SchedulerConfig
    coefficients: Coefficients
    num_blocks: int
    seqs: list[Seq]
    decode_end_s: list[float]  # each decode iteration's end: an array("d") from the engine
    end_s: float = 0.0
    num_iterations: int = 0
    busy_s: float = 0.0
    queue_area: float = 0.0
    system_area: float = 0.0
    kv_samples: KvSamples = field(default_factory=KvSamples)
    peak_used_blocks: int = 0
    num_arrived: int = 0
    unheld_blocks: int = 0  # free or prefix cache at the end: the whole pool once drained
