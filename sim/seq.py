"""A request inside the engine: its state, tokens and timestamps. The source of the compiled
class (Cython, built by the package's build as servecap.sim._seq_c with the fields' C types in
seq.pxd, which the compiled kernels read directly) and, where that is absent or was built from
another source, the same class run by the interpreter with its fields in slots (sim/state.py
picks)."""

from array import array
from collections.abc import Sequence

from .sampling import Request

WAITING, RUNNING, DONE, REJECTED = "queued", "running", "completed", "rejected"
STATES = (WAITING, RUNNING, DONE, REJECTED)  # a request's state as its index here
NAN = float("nan")


class Seq:
    """A request inside the engine. Times are absolute simulation seconds; None: not reached.
    Tokens made by a prefill are in `prefill_token_s`; tokens made by decode iterations are
    `segments` (first, last decode index, time of the token before the first) so no per-token
    list is kept; `token_times` rebuilds them."""

    __slots__ = ("_req", "request_id", "prompt_tokens", "output_tokens", "prefix_group",
                 "prefix_tokens", "state", "reason",
                 "generated", "target", "computed", "private_blocks", "prefix_blocks", "j0",
                 "prev_s", "admitted_s", "prefill_start_s", "prefill_end_s", "release_s",
                 "prefill_token_s", "segments", "preemptions", "recomputed_tokens", "chunks",
                 "prefix_hit_tokens", "swapped_tokens", "last_token_s", "extra_gaps_s",
                 "ready_s", "kv_transferred", "offload_hit_tokens")

    def __init__(self, req: Request) -> None:
        self._req = req  # and the numbers the setter below copies
        self.request_id, self.prompt_tokens, self.output_tokens = \
            req.request_id, req.prompt_tokens, req.output_tokens
        self.prefix_group, self.prefix_tokens = req.prefix_group, req.prefix_tokens
        self.state, self.reason = WAITING, ""
        self.generated, self.target, self.computed = 0, self.prompt_tokens, 0
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

    @property
    def req(self) -> Request:
        return self._req

    @req.setter
    def req(self, req: Request) -> None:
        """The request, and what of it the kernels read per step or event kept beside it
        (its id, prompt and output tokens, prefix group and prefix tokens: C fields where
        compiled, no attribute lookup on the request each time)."""
        self._req = req
        self.request_id, self.prompt_tokens, self.output_tokens = \
            req.request_id, req.prompt_tokens, req.output_tokens
        self.prefix_group, self.prefix_tokens = req.prefix_group, req.prefix_tokens

    def token_times(self, decode_end_s: Sequence[float]) -> list[float]:
        """Each generated token's ready time, in order (absolute seconds)."""
        times = list(self.prefill_token_s)
        for first, last, _ in self.segments:
            times.extend(decode_end_s[first:last + 1])
        return sorted(times)

    @property
    def first_token_s(self) -> float | None:
        return self.prefill_token_s[0] if self.prefill_token_s else None


def prefill_pairs(computed: int, chunk: int) -> int:
    """(query, key) pairs of a causal prefill chunk: token i of the chunk attends to the
    `computed` tokens before it and i of its own, sum = chunk x computed + chunk(chunk+1)/2."""
    return chunk * computed + chunk * (chunk + 1) // 2


def request_columns(seqs):
    """The fields every report reads of each request, in one pass over the objects: times
    (arrival, admitted, first token, last token, release; NaN where not reached) as C
    doubles, and the state (its index in STATES), the prompt, output and prefix tokens, the
    prefix and offload hits, preemptions, recomputed tokens and prefill chunks as 64-bit
    integers; each an array("d") or array("q") in the requests' order. Compiled, the pass
    reads each Seq's fields in C (seq.pxd)."""
    n = len(seqs)
    doubles, ints = array("d", [0.0]) * n, array("q", [0]) * n
    arrival_col, admitted_col, first_col, last_col, release_col = doubles, doubles[:], \
        doubles[:], doubles[:], doubles[:]
    state_col, prompt_col, output_col, prefix_col, hit_col, offload_col, preempt_col, \
        recomputed_col, chunks_col = ints, ints[:], ints[:], ints[:], ints[:], ints[:], \
        ints[:], ints[:], ints[:]
    arrival, admitted, first, last, release = arrival_col, admitted_col, first_col, \
        last_col, release_col
    states, prompt, output, prefix, hit, offload, preempt, recomputed, chunks = state_col, \
        prompt_col, output_col, prefix_col, hit_col, offload_col, preempt_col, \
        recomputed_col, chunks_col
    for i in range(n):
        seq = seqs[i]
        req = seq._req  # the field under the property: a C read where compiled
        arrival[i] = req.arrival_s
        admitted[i] = NAN if seq.admitted_s is None else seq.admitted_s
        first[i] = seq.prefill_token_s[0] if seq.prefill_token_s else NAN
        last[i] = seq.last_token_s
        release[i] = NAN if seq.release_s is None else seq.release_s
        state = seq.state
        states[i] = 2 if state == DONE else 3 if state == REJECTED else \
            1 if state == RUNNING else 0
        prompt[i] = seq.prompt_tokens
        output[i] = seq.output_tokens
        prefix[i] = req.prefix_tokens
        hit[i] = seq.prefix_hit_tokens
        offload[i] = seq.offload_hit_tokens
        preempt[i] = seq.preemptions
        recomputed[i] = seq.recomputed_tokens
        chunks[i] = seq.chunks
    return (arrival_col, admitted_col, first_col, last_col, release_col, state_col,
            prompt_col, output_col, prefix_col, hit_col, offload_col, preempt_col,
            recomputed_col, chunks_col)


def segment_columns(seqs, timelines):
    """Every decode segment and re-prefill gap of the requests that have a decode timeline
    (timelines: id(request) -> its engine's decode_end_s), in the requests' order, in two
    passes (count, then fill): (the timelines in the order the requests first index them;
    per segment, its timeline's index there, first and last iteration (array("q")) and the
    time of the token before it (array("d")); per re-prefill gap, its timeline's index and
    the gap)."""
    n = len(seqs)
    keys_col = array("q", [-1]) * n
    keys = keys_col
    lines, index = [], {}
    num_segments = num_extras = 0
    last_ends, last = None, 0  # one engine's requests come in runs: its index, kept
    for i in range(n):
        seq = seqs[i]
        ends = timelines.get(id(seq))
        if ends is None:
            continue
        if ends is not last_ends:
            found = index.get(id(ends))
            if found is None:
                found = index[id(ends)] = len(lines)
                lines.append(ends)
            last_ends, last = ends, found
        keys[i] = last
        num_segments += len(seq.segments)
        num_extras += len(seq.extra_gaps_s)
    seg_line_col, firsts_col, lasts_col = array("q", [0]) * num_segments, \
        array("q", [0]) * num_segments, array("q", [0]) * num_segments
    prevs_col = array("d", [0.0]) * num_segments
    extra_line_col, extras_col = array("q", [0]) * num_extras, array("d", [0.0]) * num_extras
    seg_line, firsts, lasts, prevs, extra_line, extras = seg_line_col, firsts_col, lasts_col, \
        prevs_col, extra_line_col, extras_col
    s = e = 0
    for i in range(n):
        k = keys[i]
        if k < 0:
            continue
        seq = seqs[i]
        for segment in seq.segments:
            seg_line[s] = k
            firsts[s] = segment[0]
            lasts[s] = segment[1]
            prevs[s] = segment[2]
            s += 1
        for gap in seq.extra_gaps_s:
            extra_line[e] = k
            extras[e] = gap
            e += 1
    return lines, seg_line_col, firsts_col, lasts_col, prevs_col, extra_line_col, extras_col
