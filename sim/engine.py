"""The iteration-level engine: admission over paged blocks, decode bookkeeping, preemption."""

from array import array
from bisect import insort
from collections import deque
from dataclasses import replace
from operator import attrgetter

from servecap.ledger.paging import blocks_for

from .config import SchedulerConfig
from .kvpool import HostTier
from .pool import BlockPool
from .roofline import Coefficients, reload_s, swap_s
from .sampling import Request
from .state import DONE, REJECTED, RUNNING, WAITING, Seq, SimResult
from .step_model import (
    decode_pricer,
    decode_step_constants,
    dense_decode_constants,
    step_constants,
    step_jitter,
)

INF = float("inf")
# The API server's tokenizer micro-batch (an experiment, off: 1; bench/vllm_latency.py
# --microbatch-intake sets it around a run): from v0.10.1 the server tokenizes prompts through
# AsyncMicrobatchTokenizer (vllm/utils/__init__.py at v0.10.1, vllm/utils/async_utils.py at
# v0.19.0, used by vllm/renderers/base.py at v0.23.0): the first prompt waits up to
# batch_wait_timeout_s = 2 ms for up to max_batch_size = 32 in all, the batch is tokenized in
# one call on one thread and its requests go on together. "batch": the most requests one
# batch takes, "window_s": how long its first one waits for more
INTAKE = {"batch": 1, "window_s": 0.0}


class Engine:
    """Decoding sequences all step in a decode iteration, so per-iteration work is O(1) in the
    batch: block needs are counted by residue class (a sequence needs a block when its held
    tokens are a multiple of block_size), live KV tokens as base + n x index, and finishes are
    known in advance by decode index."""

    # attributes in fixed slots: the compiled loop and decode kernel read and write them
    # through the type's slot descriptors instead of an instance dictionary
    __slots__ = ("coef", "cfg", "bsz", "pool", "host", "seqs", "next_arrival", "owed",
                 "j0_sum", "waiting", "prefilling", "running", "decoding", "finish_at",
                 "finish_flags", "block_counts", "too_long", "residue", "ctx_base", "dec_idx",
                 "now", "extra_s", "reserved_blocks", "steps_since_prefill", "group_steps",
                 "by_priority", "jitter", "price", "dense", "step_shared", "step_per_n",
                 "step_known", "step_k", "frontend_free", "frontend_s", "frontend_latency_s",
                 "closed", "next_closed", "result", "num_iterations", "busy_s", "queue_area",
                 "system_area", "ends", "sample_times", "sample_tokens", "sample_blocks",
                 "state_blocks", "max_num_seqs", "max_num_batched_tokens", "max_waiting_steps",
                 "num_scheduler_steps", "prefix_caching", "speculation", "intake_batch",
                 "intake_window", "batch_open", "batch_from", "batch_seqs")

    def __init__(self, requests: list[Request], coef: Coefficients, config: SchedulerConfig,
                 num_blocks: int) -> None:
        self.coef, self.cfg, self.bsz = coef, config, config.block_size_tokens
        # the config's values the kernels read per request or iteration, in the engine's own
        # fields (C fields where compiled) rather than through the frozen config each time
        self.state_blocks, self.max_num_seqs = config.state_blocks, config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.max_waiting_steps = config.max_waiting_steps
        self.too_long = config.length_check()  # None: no request is too long
        self.num_scheduler_steps = config.num_scheduler_steps
        self.prefix_caching, self.speculation = config.prefix_caching, config.speculation
        self.pool = BlockPool(num_blocks, config.watermark_blocks(num_blocks))
        self.host = HostTier(config.offload_tokens) if config.offload_tokens else None
        self.seqs = [Seq(r) for r in sorted(requests, key=_ARRIVAL)]
        self.next_arrival = 0
        # the router's outstanding tokens kept as they change (cluster.outstanding_tokens):
        # owed(s) = target - computed + output_tokens - generated summed over every request
        # routed here and not yet released, and j0 summed over the decode set
        self.owed = sum(owed(s) for s in self.seqs)
        self.j0_sum = 0
        self.waiting: deque[Seq] = deque()
        self.prefilling: list[Seq] = []
        self.running: dict[int, Seq] = {}
        self.decoding: dict[int, Seq] = {}
        self.finish_at: dict[int, list[Seq]] = {}
        # finish_at's keys as set bytes: the decode kernel reads a step's byte (a C load where
        # compiled) and looks in the dictionary only where it is set
        self.finish_flags = bytearray()
        self.residue = [0] * self.bsz
        self.block_counts: dict[int, int] = {}  # blocks_for of each token count met (blocks)
        self.ctx_base = 0
        self.dec_idx = 0
        self.now = 0.0
        self.extra_s = 0.0
        self.reserved_blocks = 0
        self.steps_since_prefill = 0
        self.group_steps = 0  # decode steps since the last scheduling point (multi-step)
        self.by_priority = config.scheduling == "priority"
        self.jitter = step_jitter(coef.step_time_cv, config.seed)
        self.price, self.dense = decode_pricer(coef), dense_decode_constants(coef)
        # decode-only steps the dense inlining does not cover: decode_step_constants, and
        # the per-batch-size terms as the decode loop meets each size
        self.step_shared, self.step_per_n = decode_step_constants(coef)
        self.step_known: dict[int, tuple] = {}
        self.step_k = step_constants(coef)  # any step's price, inlined by the loop (or None)
        self.frontend_free = 0.0  # when the API server is next free (coef.frontend_s)
        # the API server's time per request and latency, read per request (C doubles where
        # compiled: no attribute lookup on the coefficients each time)
        self.frontend_s, self.frontend_latency_s = coef.frontend_s, coef.frontend_latency_s
        # the tokenizer's micro-batch (INTAKE): its size, wait, first arrival, when the server
        # was free before it, and its requests (released together)
        self.intake_batch, self.intake_window = int(INTAKE["batch"]), float(INTAKE["window_s"])
        self.batch_open, self.batch_from, self.batch_seqs = -INF, 0.0, []
        self.closed = config.concurrency is not None
        self.next_closed = 0
        if self.closed:
            self._open_closed_loop(config.concurrency)
        elif coef.frontend_s or coef.frontend_latency_s:
            for seq in self.seqs:
                self.through_frontend(seq)
        self.result = SimResult(config.policy, config, coef, num_blocks, self.seqs, array("d"))
        # the run's counters add up here, C fields where compiled (run.finish_run writes them
        # into the result), and the result's own timeline and KV sample columns are held here
        # too: the kernels reach them without a Python attribute lookup per iteration
        self.num_iterations, self.busy_s, self.queue_area, self.system_area = 0, 0.0, 0.0, 0.0
        samples = self.result.kv_samples
        self.ends, self.sample_times, self.sample_tokens, self.sample_blocks = \
            self.result.decode_end_s, samples.times, samples.tokens, samples.blocks

    # arrivals -------------------------------------------------------------------------------
    def _open_closed_loop(self, concurrency: int) -> None:
        """Closed loop: the first `concurrency` requests are sent at 0, each later one when a
        request finishes (or is rejected); offered arrival times are ignored."""
        for seq in self.seqs:
            seq.ready_s = INF
        for _ in range(min(concurrency, len(self.seqs))):
            self.send_next()

    def send_next(self) -> None:
        if self.next_closed < len(self.seqs):
            seq = self.seqs[self.next_closed]
            seq.req = replace(seq.req, arrival_s=self.now)
            seq.ready_s = self.now
            self.through_frontend(seq)
            self.next_closed += 1

    def pull_arrivals(self) -> None:
        """Queue every request accepted by now; one longer than max_model_len, or that could
        never fit in the pool, is rejected."""
        seqs, now = self.seqs, self.now
        limit = self.pool.num_blocks - self.pool.watermark_blocks
        while self.next_arrival < len(seqs):
            seq = seqs[self.next_arrival]  # a typed local: its fields read in C where compiled
            if seq.ready_s > now:
                return  # most calls: nothing has arrived since the last
            self.next_arrival += 1
            self.queue_area += now - seq.ready_s
            self.system_area += now - seq.ready_s
            need = self.blocks(seq.prompt_tokens + seq.output_tokens) + self.state_blocks
            too_long = None if self.too_long is None \
                else self.too_long(seq.prompt_tokens, seq.output_tokens)
            if too_long or need > limit:
                self.owed -= owed(seq)
                held = f" (with its fixed state's {self.state_blocks})" \
                    if self.state_blocks else ""
                reject(seq, too_long or f"needs {need} KV blocks{held}; the pool admits at "
                       f"most {limit}")
                if self.closed:
                    self.send_next()
            elif self.by_priority:
                insort(self.waiting, seq, key=_priority_key)
            else:
                self.waiting.append(seq)

    def idle(self) -> bool:
        return not (self.waiting or self.running)

    def jump_to_next_arrival(self) -> bool:
        if self.next_arrival >= len(self.seqs):
            return False
        head = self.seqs[self.next_arrival]
        if head.ready_s == INF:
            return False
        self.now = max(self.now, head.ready_s)
        return True

    def through_frontend(self, seq: Seq) -> None:
        """The API server takes requests one at a time, in the order they reach it, for
        coef.frontend_s each; the engine sees a request coef.frontend_latency_s after it is
        through, a latency that holds no one else up (the hops to the engine core and back:
        paid here once, it shifts the request's first token and its last alike, and a later
        request is not kept waiting by it)."""
        if not (self.frontend_s or self.frontend_latency_s):
            return
        if self.intake_batch > 1:
            self.through_batch(seq)
            return
        self.frontend_free = max(self.frontend_free, seq.ready_s) + self.frontend_s
        seq.ready_s = self.frontend_free + self.frontend_latency_s

    def through_batch(self, seq: Seq) -> None:
        """INTAKE's micro-batch: a request that reaches the server within intake_window of
        the open batch's first, while it holds fewer than intake_batch, joins it; else it
        opens the next. A batch starts when it is full or its window ends, and once the
        server is through the batch before it; its requests take frontend_s each, one after
        another, and all go on when the last is through."""
        batch = self.batch_seqs
        if batch and len(batch) < self.intake_batch \
                and seq.ready_s <= self.batch_open + self.intake_window:
            batch.append(seq)
        else:
            self.batch_from, self.batch_open = self.frontend_free, seq.ready_s
            batch = self.batch_seqs = [seq]
        opens = seq.ready_s if len(batch) == self.intake_batch \
            else self.batch_open + self.intake_window
        self.frontend_free = max(self.batch_from, opens) + self.frontend_s * len(batch)
        for member in batch:
            member.ready_s = self.frontend_free + self.frontend_latency_s

    def add(self, seq: Seq) -> None:
        """A request routed here now (in ready order, at or after the engine's last pull),
        through this replica's API server."""
        self.through_frontend(seq)
        self.seqs.append(seq)
        self.owed += owed(seq)

    # admission ------------------------------------------------------------------------------
    def prefix_hit_blocks(self, seq: Seq) -> int:
        # the request's prefix as the Seq keeps it: C fields where compiled
        if not (self.prefix_caching and seq.prefix_group) or seq.swapped_tokens:
            return 0
        cached = self.pool.is_cached(seq.prefix_group) or (
            self.host is not None and self.host.holds(seq.prefix_group))
        return seq.prefix_tokens // self.bsz if cached else 0

    def prefill_need(self, seq: Seq) -> int:
        """Tokens the admitted prompt would still compute (after prefix-cache hits)."""
        if seq.swapped_tokens:
            return 0
        return max(seq.target - self.prefix_hit_blocks(seq) * self.bsz, 1)

    def try_admit(self, seq: Seq) -> bool:
        """Allocate blocks for the whole prompt (or the swapped-out KV), and a hybrid's fixed
        state, above the watermark."""
        pool, group = self.pool, seq.prefix_group
        hit = self.prefix_hit_blocks(seq)
        # a prefix found in the host tier only: its blocks are allocated here and loaded back
        reload = hit and not pool.is_cached(group)
        tokens = seq.swapped_tokens or seq.target
        blocks = self.blocks(tokens)
        need = blocks - (0 if reload else hit)
        taken = need + self.state_blocks
        spare = pool.available(group if hit and not reload else None) \
            - self.reserved_blocks - taken
        if spare < pool.watermark_blocks:
            return False
        self.waiting.popleft()
        if hit:
            pool.acquire_prefix(group, hit)
        pool.allocate(taken, keep=self.reserved_blocks)
        self.owed += seq.computed
        seq.state, seq.computed, seq.prefix_blocks = RUNNING, 0, hit
        if reload:
            self.extra_s += reload_s(self.coef, hit * self.bsz)
            self.host.load(group, hit * self.bsz)
            seq.offload_hit_tokens += hit * self.bsz
        if seq.admitted_s is None:
            seq.admitted_s = self.now
        self.running[seq.request_id] = seq
        if seq.swapped_tokens:
            return self._swap_in(seq, need)
        self._share_prefix(seq, hit, blocks)
        self.prefilling.append(seq)
        return True

    def _share_prefix(self, seq: Seq, hit: int, blocks: int) -> None:
        """blocks: the whole prompt's, blocks(seq.target) (try_admit's count)."""
        if hit:
            seq.computed = min(hit * self.bsz, seq.target - 1)
            self.owed -= seq.computed
            seq.prefix_hit_tokens += seq.computed
        seq.private_blocks = blocks - seq.prefix_blocks

    def publish_prefix(self, seq: Seq) -> None:
        """Once a prompt is computed, its full prefix blocks become the group's cache (vLLM
        caches only computed full blocks); a group cached meanwhile keeps this copy private.
        A host offload tier stores the prompt's full blocks as well."""
        group = seq.prefix_group
        if self.host is not None:
            shared = seq.prefix_tokens // self.bsz * self.bsz if group else 0
            if shared:
                self.host.store(("group", group), shared)
            self.host.store(("request", seq.request_id), seq.target // self.bsz * self.bsz
                            - shared)
        if not (self.prefix_caching and group) or seq.prefix_blocks \
                or self.pool.is_cached(group) or seq.prefix_tokens < self.bsz:
            return
        seq.prefix_blocks = seq.prefix_tokens // self.bsz
        seq.private_blocks -= seq.prefix_blocks
        self.pool.acquire_prefix(group, seq.prefix_blocks)

    def _swap_in(self, seq: Seq, blocks: int) -> bool:
        if not seq.kv_transferred:  # a transferred KV arrived over the link, off this clock
            self.extra_s += swap_s(self.coef, seq.swapped_tokens)
        seq.kv_transferred = False
        self.owed += seq.swapped_tokens - seq.target
        seq.target, seq.private_blocks, seq.swapped_tokens = seq.swapped_tokens, blocks, 0
        self.start_decoding(seq)
        return True

    # decode bookkeeping ---------------------------------------------------------------------
    def start_decoding(self, seq: Seq) -> None:
        """Join the decode set at the next decode iteration with `target` tokens of KV held."""
        j0 = self.dec_idx
        seq.j0, seq.prev_s = j0, seq.last_token_s
        self.j0_sum += j0
        self.decoding[seq.request_id] = seq
        self.residue[(j0 - seq.target) % self.bsz] += 1
        self.ctx_base += seq.target - j0
        last = j0 + seq.output_tokens - seq.generated - 1
        self.finish_at.setdefault(last, []).append(seq)
        flags = self.finish_flags
        if last >= len(flags):
            flags.extend(bytes(last + 1))  # at least doubled: amortized O(1) a sequence
        flags[last] = 1  # left set once popped: the decode index only moves on past it

    def _stop_decoding(self, seq: Seq, last: int) -> int:
        """Leave the decode set after decode iteration `last`; returns KV tokens held."""
        del self.decoding[seq.request_id]
        self.j0_sum -= seq.j0
        self.residue[(seq.j0 - seq.target) % self.bsz] -= 1
        self.ctx_base -= seq.target - seq.j0
        steps = last - seq.j0 + 1
        if steps > 0:
            seq.segments.append((seq.j0, last, seq.prev_s))
            seq.generated += steps
            self.owed -= steps
            seq.last_token_s = self.ends[last]
        return seq.target + steps

    def live_kv_tokens(self) -> int:
        return self.ctx_base + len(self.decoding) * self.dec_idx

    def release(self, seq: Seq, num_blocks: int) -> None:
        """Give back a leaving sequence's KV blocks and its fixed state's."""
        self.pool.release(num_blocks + self.state_blocks)
        if seq.prefix_blocks:
            self.pool.release_prefix(seq.prefix_group)
        seq.prefix_blocks = 0
        del self.running[seq.request_id]

    def held_blocks(self, seq: Seq, held_tokens: int) -> int:
        return self.blocks(held_tokens) - seq.prefix_blocks

    def blocks(self, num_tokens: int) -> int:
        """blocks_for(num_tokens, block size), called once a run for each count: a request's
        counts (its whole length on arrival, its prompt on admission, what it holds when
        it leaves) repeat across requests, and a dictionary lookup costs a fraction of a
        Python call."""
        blocks = self.block_counts.get(num_tokens)
        if blocks is None:
            blocks = self.block_counts[num_tokens] = blocks_for(num_tokens, self.bsz)
        return blocks

    def finish(self, seq: Seq, held_tokens: int) -> None:
        self.owed -= owed(seq)
        self.release(seq, self.held_blocks(seq, held_tokens))
        seq.state, seq.release_s = DONE, self.now
        if self.closed:
            self.send_next()

    def preempt(self, seq: Seq) -> None:
        """Free a running sequence: by recompute (its KV is dropped and its prompt plus the
        tokens so far are prefilled again) or by swap (a decoding sequence's KV goes to host
        memory and comes back before it decodes again)."""
        decoding = seq.request_id in self.decoding
        if decoding:
            held = self._stop_decoding(seq, self.dec_idx - 1)
            self.release(seq, self.held_blocks(seq, held))
        else:
            self.prefilling.remove(seq)
            held = seq.computed
            self.release(seq, seq.private_blocks)
        seq.preemptions += 1
        seq.state = WAITING
        if decoding and self.cfg.preemption_mode == "swap":
            seq.swapped_tokens = held
            self.extra_s += swap_s(self.coef, held)
        else:
            seq.recomputed_tokens += held
            self.owed += seq.prompt_tokens + seq.generated - seq.target + seq.computed
            seq.target, seq.computed = seq.prompt_tokens + seq.generated, 0
        if self.by_priority:
            insort(self.waiting, seq, key=_priority_key)
        else:
            self.waiting.appendleft(seq)

    def swap_in_waiting(self) -> None:
        """Swapped-out sequences at the head of the queue come back first, straight to decode."""
        while self.waiting and self.waiting[0].swapped_tokens \
                and len(self.running) < self.max_num_seqs and self.try_admit(self.waiting[0]):
            pass

    def mid_group(self) -> int:
        """Decode steps left in the current multi-step group (0: the scheduler may run)."""
        k = self.num_scheduler_steps
        if k == 1 or not self.decoding:
            return 0
        return (k - self.group_steps % k) % k

    def reserve_decode(self) -> None:
        """Before admitting anything, secure the blocks this iteration's decodes will write."""
        if self.decoding:
            self.make_room_for_decode()
            self.reserved_blocks = self.residue[self.dec_idx % self.bsz]

    def make_room_for_decode(self) -> None:
        """Evict cached prefixes, then preempt the latest-admitted sequence, until this decode
        iteration's new blocks fit."""
        pool = self.pool
        while self.residue[self.dec_idx % self.bsz] > pool.free:
            if not pool.evict_one():
                self.preempt(self.victim())

    def victim(self) -> Seq:
        """The latest-admitted running sequence; by priority, the least important first."""
        if self.by_priority:
            order = {rid: i for i, rid in enumerate(self.running)}
            return max(self.running.values(),
                       key=lambda s: (s.req.priority, order[s.request_id]))
        return self.running[next(reversed(self.running))]


def reject(seq: Seq, reason: str) -> None:
    """Refused on arrival: released at once, never queued."""
    seq.state, seq.release_s, seq.reason = REJECTED, seq.req.arrival_s, reason


def owed(seq: Seq) -> int:
    """Tokens a held request still owes: prompt tokens to compute and output to make (a
    decoding sequence's generated lags by the steps since it joined the decode set)."""
    return seq.target - seq.computed + seq.output_tokens - seq.generated


_ARRIVAL = attrgetter("arrival_s")  # the requests' order: by arrival, ties as given


def _priority_key(seq: Seq) -> tuple[int, float, int]:
    return seq.req.priority, seq.ready_s, seq.request_id
