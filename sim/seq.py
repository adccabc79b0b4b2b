"""A request inside the engine: its state, tokens and timestamps. The source of the compiled
class (Cython, built by the package's build as servecap.sim._seq_c with the fields' C types in
seq.pxd, which the compiled kernels read directly) and, where that is absent or was built from
another source, the same class run by the interpreter with its fields in slots (sim/state.py
picks)."""

from collections.abc import Sequence

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

    def token_times(self, decode_end_s: Sequence[float]) -> list[float]:
        """Each generated token's ready time, in order (absolute seconds)."""
        times = list(self.prefill_token_s)
        for first, last, _ in self.segments:
            times.extend(decode_end_s[first:last + 1])
        return sorted(times)

    @property
    def first_token_s(self) -> float | None:
        return self.prefill_token_s[0] if self.prefill_token_s else None
