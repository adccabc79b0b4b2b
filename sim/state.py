"""Per-request simulation state and the timestamps every metric is computed from."""

from array import array
from dataclasses import dataclass, field

from .config import SchedulerConfig
from .roofline import Coefficients
from .sampling import Request

WAITING, RUNNING, DONE, REJECTED = "queued", "running", "completed", "rejected"


class Seq:
    """A request inside the engine. Times are absolute simulation seconds; None: not reached.
    Tokens made by a prefill are in `prefill_token_s`; tokens made by decode iterations are
    `segments` (first, last decode index, time of the token before the first) so no per-token
    list is kept; `token_times` rebuilds them."""

    __slots__ = ("req", "state", "reason", "generated", "target", "computed", "private_blocks",
                 "prefix_blocks", "j0", "prev_s", "admitted_s", "prefill_start_s",
                 "prefill_end_s", "release_s", "prefill_token_s", "segments", "preemptions",
                 "recomputed_tokens", "chunks", "prefix_hit_tokens", "swapped_tokens",
                 "last_token_s", "extra_gaps_s", "ready_s", "kv_transferred",
                 "offload_hit_tokens")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.state, self.reason = WAITING, ""
        self.generated, self.target, self.computed = 0, req.prompt_tokens, 0
        self.private_blocks = self.prefix_blocks = self.j0 = 0
        self.prev_s = 0.0
        self.admitted_s = self.prefill_start_s = self.prefill_end_s = self.release_s = None
        self.prefill_token_s: list[float] = []
        self.segments: list[tuple[int, int, float]] = []
        self.preemptions = self.recomputed_tokens = self.chunks = 0
        self.prefix_hit_tokens = self.swapped_tokens = 0
        self.offload_hit_tokens = 0  # of prefix_hit_tokens: loaded back from a host tier
        self.last_token_s = 0.0
        self.ready_s = req.arrival_s  # when the engine may take it (after a KV transfer)
        self.kv_transferred = False
        self.extra_gaps_s: list[float] = []  # gaps ending in a re-prefill token (recompute)

    def token_times(self, decode_end_s: list[float]) -> list[float]:
        """Each generated token's ready time, in order (absolute seconds)."""
        times = list(self.prefill_token_s)
        for first, last, _ in self.segments:
            times.extend(decode_end_s[first:last + 1])
        return sorted(times)

    @property
    def first_token_s(self) -> float | None:
        return self.prefill_token_s[0] if self.prefill_token_s else None


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
