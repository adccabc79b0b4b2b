"""The engine: add requests, step the scheduler and model, run a workload; records every time.

    engine = Engine.from_spec(spec, serve, device="cpu")
    records = engine.run([Arrival(0.0, 128, 32), Arrival(0.5, 512, 64)], realtime=True)

Telemetry hooks: engine.tensor_bytes() counts the runtime's own resident tensors (weights, KV
pool); engine.profile_run() runs the widest schedulable step once (measure the transient peak
around it); functions in engine.step_hooks get a StepStats after every step (sample memory
there); engine.max_resident_requests is the most sequences that ever held blocks at once and
engine.max_blocks_in_use the most blocks, both read right after scheduling, before a step's
finished requests give theirs back.
"""

import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from servecap.ledger.errors import SpecError
from servecap.ledger.kv import Shard
from servecap.ledger.model import SLIDING, ModelSpec
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.verification import state_pool_slots

from .block_manager import BlockManager
from .engine_config import DEFAULT_ENGINE_CONFIG, EngineConfig, StepStats
from .isolation import forward_isolated, sample_isolated
from .kv_pool import KVPool, blocks_for_plan
from .model import Decoder
from .parallel import SINGLE, TensorParallel, broadcast_int
from .runner import profile_forward
from .scheduler import Scheduler, StepPlan
from .sequence import (
    CANCELLED,
    ENDED,
    FAILED,
    FINISHED,
    REJECTED,
    Arrival,
    RequestRecord,
    Sequence,
    check_request,
)
from .state_pool import StatePool, StateSlots
from .weights import load_decoder, random_decoder


class Engine:
    """states: the hybrids' state pool (required when the model has linear-attention or
    Mamba layers). Prefix caching is off for them: a cached prefix's KV does not give back the
    state after it (vLLM's mamba_cache_mode 'none')."""

    def __init__(self, model: Decoder, pool: KVPool, config: EngineConfig = DEFAULT_ENGINE_CONFIG,
                 states: StatePool | None = None) -> None:
        if bool(model.spec.state_layers) != (states is not None):
            raise SpecError("state pool", states is not None, "a state pool exactly when the "
                            "model has linear-attention or Mamba layers")
        self.model, self.pool, self.config, self.states = model, pool, config, states
        self.blocks = BlockManager(pool.num_blocks, pool.block_size_tokens,
                                   config.enable_prefix_caching and states is None)
        window = windowed_everywhere(model.spec) if config.free_out_of_window else None
        self.slots = StateSlots(states.num_slots) if states is not None else None
        self.scheduler = Scheduler(self.blocks, config.max_num_seqs,
                                   config.max_num_batched_tokens, config.reserve_full_context,
                                   window, self.slots, config.window_budget_tokens)
        self.records: list[RequestRecord] = []
        self.step_hooks: list[Callable[[StepStats], None]] = []
        self.num_steps = self.max_resident_requests = self.max_blocks_in_use = 0
        self.max_state_slots_in_use = 0
        self._seqs: dict[int, list[Sequence]] = {}
        self._generators: dict[int, torch.Generator] = {}
        self._next_seq_id = self._next_request_id = 0
        self._start_s = time.perf_counter()
        self._observed_s = 0.0  # time the step hooks took: observers, not the engine

    @classmethod
    def from_spec(cls, spec: ModelSpec, serve: ServeSpec, device: str = "cpu",
                  num_blocks: int | None = None, seed: int = 0,
                  weights_dir: str | Path | None = None, tp: TensorParallel = SINGLE,
                  **config) -> "Engine":
        """Weights in serve.weight_dtype (seeded random, or a local safetensors directory) and a
        KV pool of serve.kv_dtype blocks: num_blocks, else what the ledger's plan for this
        rank's shard leaves."""
        model = (load_decoder(spec, weights_dir, serve.weight_dtype, device, tp) if weights_dir
                 else random_decoder(spec, serve.weight_dtype, device, seed, tp=tp))
        plan = build_plan(spec, serve, shard=Shard(tp.size))
        if num_blocks is None:
            num_blocks = blocks_for_plan(spec, plan, tp.size)
        pool = KVPool(spec, num_blocks, serve.block_size_tokens, serve.kv_dtype, device,
                      tp.size)
        states = StatePool(spec, state_pool_slots(plan), device, tp.size) \
            if spec.state_layers else None
        config.setdefault("max_num_seqs", serve.max_num_seqs)
        config.setdefault("max_num_batched_tokens", serve.max_num_batched_tokens)
        return cls(model, pool, EngineConfig(**config), states)

    # -- memory the runtime owns ---------------------------------------------------------
    @property
    def weight_bytes(self) -> int:
        return self.model.weight_bytes

    @property
    def kv_pool_bytes(self) -> int:
        return self.pool.tensor_bytes

    def tensor_bytes(self) -> dict[str, int]:
        """Resident tensors by ledger line; the null block is the pool's one extra block."""
        return {"weights_bytes": self.weight_bytes, "kv_pool_bytes": self.kv_pool_bytes,
                "kv_usable_bytes": self.pool.usable_bytes,
                "kv_null_block_bytes": self.pool.null_block_bytes,
                "state_pool_bytes": self.states.tensor_bytes if self.states else 0}

    def profile_run(self, max_model_len: int | None = None) -> None:
        """The widest steps the scheduler allows (max_num_batched_tokens prefill tokens,
        max_num_seqs decodes, logits for max_num_seqs rows), contexts up to max_model_len;
        touches no request and no usable block."""
        profile_forward(self.model, self.pool, self.config.max_num_batched_tokens,
                        self.config.max_num_seqs, max_model_len, self.states)

    def now(self) -> float:
        """Seconds of the engine's own time since it started (or since run() began): the wall
        clock less what its step hooks took. The hooks observe the engine (the calibration
        clock, the emulated device's allocation counting, whose every-64-steps fold of the
        profiler's events took 0.3-0.7 s on the CPU), and a replay that waited for them queued
        its arrivals behind the measurement: TTFT p50 46-144 ms against 2-4 ms steps."""
        return time.perf_counter() - self._start_s - self._observed_s

    # -- requests ------------------------------------------------------------------------
    def add_request(self, prompt_token_ids: list[int], max_output_tokens: int,
                    temperature: float = 0.0, seed: int = 0, n: int = 1) -> RequestRecord:
        """Queue a request. One longer than the pool can ever hold is rejected here, with a
        reason in its record, rather than failing for memory later."""
        prompt = [int(t) for t in prompt_token_ids]
        check_request(prompt, max_output_tokens, self.model.spec.vocab_size, temperature, n)
        request_id, self._next_request_id = self._next_request_id, self._next_request_id + 1
        record = RequestRecord(request_id, len(prompt), max_output_tokens,
                               accepted_s=self.now())
        self.records.append(record)
        seq = Sequence(self._new_seq_id(), prompt, len(prompt), max_output_tokens,
                       temperature, seed, record, parallel=n)
        self._seqs[request_id] = [seq]
        reason = self._too_long(seq)
        if reason:
            record.status, record.reason, record.released_s = REJECTED, reason, self.now()
        else:
            self.scheduler.waiting.append(seq)
        return record

    def check_request(self, prompt_token_ids: list[int], max_output_tokens: int,
                      temperature: float = 0.0, n: int = 1) -> None:
        """add_request's checks without queueing anything (reads no state another thread
        changes): SpecError for a bad field or a request the whole pool could never hold."""
        check_request(prompt_token_ids, max_output_tokens, self.model.spec.vocab_size,
                      temperature, n)
        probe = Sequence(-1, list(prompt_token_ids), len(prompt_token_ids),
                         max_output_tokens, temperature, 0, RequestRecord(-1, 0, 0),
                         parallel=n)
        reason = self._too_long(probe)
        if reason:
            raise SpecError("max_tokens", max_output_tokens, reason)

    def _too_long(self, seq: Sequence) -> str:
        """Blocks this request needs even alone (every sample's full length; forks share the
        full prompt blocks), as the scheduler would reserve them."""
        if seq.parallel > self.config.max_num_seqs:
            return f"n = {seq.parallel} samples exceed max_num_seqs = {self.config.max_num_seqs}"
        needed = self.scheduler.blocks_needed_alone(seq)
        if needed <= self.pool.num_blocks:
            return ""
        return (f"needs {needed:,} KV blocks ({seq.parallel} x {seq.max_tokens:,} tokens in "
                f"{self.pool.block_size_tokens}-token blocks); the pool holds "
                f"{self.pool.num_blocks:,}")

    def _new_seq_id(self) -> int:
        self._next_seq_id += 1
        return self._next_seq_id - 1

    def cancel(self, request_id: int) -> None:
        """Stop a request now; its blocks are back in the free list when this returns."""
        for seq in self._seqs[request_id]:
            if seq.record.status in ENDED:
                continue
            self.scheduler.release(seq)
            seq.record.status, seq.record.released_s = CANCELLED, self.now()

    def release(self, request_id: int) -> None:
        """Forget a finished, rejected or cancelled request: its records and sequences leave
        the engine's bookkeeping (a server calls it once the request's tokens are sent, so a
        long run keeps only the live ones). A request still running is an error."""
        seqs = self._seqs.get(request_id, [])
        if any(s.record.status not in ENDED for s in seqs):
            raise ValueError(f"request {request_id} is still running; cancel it first")
        for seq in self._seqs.pop(request_id, []):
            self._generators.pop(seq.seq_id, None)
        self.records = [r for r in self.records if r.request_id != request_id]

    def has_unfinished(self) -> bool:
        return bool(self.scheduler.waiting or self.scheduler.running)

    # -- stepping ------------------------------------------------------------------------
    def step(self) -> StepStats:
        """One iteration: schedule, copy-on-write, forward, sample, retire finished ones."""
        start = self.now()
        plan = self.scheduler.schedule()
        now = self.now()
        self.max_resident_requests = max(self.max_resident_requests,
                                         len(self.scheduler.running))
        self.max_blocks_in_use = max(self.max_blocks_in_use,
                                     self.blocks.num_blocks - self.blocks.num_free_blocks)
        if self.slots is not None:
            self.max_state_slots_in_use = max(self.max_state_slots_in_use,
                                              self.slots.num_slots - self.slots.num_free)
        for seq in plan.admitted:
            seq.record.admitted_s = seq.record.admitted_s or now
            if self.states is not None:  # a slot's last holder left its state behind
                self.states.clear_slot(seq.state_slot)
        context = sum(seq.num_computed_tokens + n for seq, n in plan.chunks)
        decodes = sum(1 for _, n in plan.chunks if n == 1)
        work = _attention_work(plan.chunks)
        if plan.chunks:
            self._forward(plan, now)
            self._synchronize()
        self.num_steps += 1
        end = self.now()
        stats = StepStats(self.num_steps, end, end - start, plan.num_batched_tokens, decodes,
                          context, len(self.scheduler.running), len(self.scheduler.waiting),
                          self.blocks.num_free_blocks, len(plan.admitted), len(plan.preempted),
                          *work, len(plan.chunks))
        observed = time.perf_counter()
        for hook in self.step_hooks:
            hook(stats)
        self._observed_s += time.perf_counter() - observed
        return stats

    def _synchronize(self) -> None:
        """A step's time is its device time: wait for the kernels it queued, also when it made
        no token (only partial prefill chunks), so its time does not land on the next step."""
        if self.model.device.type == "cuda":
            torch.cuda.synchronize(self.model.device)

    def _forward(self, plan: StepPlan, now: float) -> None:
        self.pool.copy_blocks(plan.copies)
        for seq, num_tokens in plan.chunks:
            if seq.record.prefill_start_s is None:
                seq.record.prefill_start_s = now
            if num_tokens > 1 or seq.num_computed_tokens < seq.num_prompt_tokens:
                seq.record.num_prefill_chunks += 1  # not a decode: simulate's prefill_chunks
        logits, ready, failed = forward_isolated(self.model, self.pool, self.blocks,
                                                 plan.chunks, self.states)
        for seq, num_tokens in plan.chunks:
            if seq.seq_id not in failed:
                seq.num_computed_tokens += num_tokens
                self.blocks.mark_computed(seq.seq_id, seq.token_ids, seq.num_computed_tokens)
        rows, seqs = self._fork(logits, ready)
        tokens, unsampled = sample_isolated(rows, seqs, self._generator)
        ready_s = self.now()
        for seq, token in tokens:
            self._append(seq, token, ready_s)
        for seq, _ in plan.chunks + [(s, 0) for s in seqs]:
            reason = failed.get(seq.seq_id) or unsampled.get(seq.seq_id)
            if reason and seq.record.status not in ENDED:
                self._fail(seq, reason)

    def _fail(self, seq: Sequence, reason: str) -> None:
        """This request's own work raised: it ends (status failed, with the reason) and gives
        its blocks back; the rest of the step stands."""
        self.scheduler.release(seq)
        self._generators.pop(seq.seq_id, None)
        seq.record.status, seq.record.reason, seq.record.released_s = FAILED, reason, self.now()

    def _fork(self, logits: torch.Tensor,
              ready: list[Sequence]) -> tuple[torch.Tensor, list[Sequence]]:
        """Parallel sampling: a sequence with n > 1 forks n - 1 children sharing its blocks
        once its prompt is computed; each child draws its own token from the same logits."""
        rows, seqs = [], []
        for i, seq in enumerate(ready):
            family = [seq]
            for k in range(1, seq.parallel):
                child = Sequence(self._new_seq_id(), list(seq.token_ids), seq.num_prompt_tokens,
                                 seq.max_output_tokens, seq.temperature, seq.seed + k,
                                 self._child_record(seq.record), seq.num_computed_tokens,
                                 seq.status)
                self.blocks.fork(seq.seq_id, child.seq_id)
                if self.slots is not None:  # a sample starts from its parent's state
                    child.state_slot = self.slots.take()
                    self.states.copy_slot(seq.state_slot, child.state_slot)
                self.scheduler.running.append(child)
                self._seqs[seq.record.request_id].append(child)
                family.append(child)
            seq.parallel = 1
            rows += [i] * len(family)
            seqs += family
        same = rows == list(range(len(ready)))  # nothing forked: no (R, V) copy
        return logits if same or not rows else logits[rows], seqs

    def _child_record(self, parent: RequestRecord) -> RequestRecord:
        record = RequestRecord(parent.request_id, parent.num_prompt_tokens,
                               parent.max_output_tokens, parent.status,
                               arrival_s=parent.arrival_s, accepted_s=parent.accepted_s,
                               admitted_s=parent.admitted_s,
                               prefill_start_s=parent.prefill_start_s,
                               num_prefill_chunks=parent.num_prefill_chunks)
        self.records.append(record)
        return record

    def _generator(self, seq: Sequence) -> torch.Generator | None:
        if seq.temperature == 0:
            return None
        if seq.seq_id not in self._generators:
            gen = torch.Generator(device=self.model.device).manual_seed(seq.seed)
            self._generators[seq.seq_id] = gen
        return self._generators[seq.seq_id]

    def _append(self, seq: Sequence, token: int, ready_s: float) -> None:
        seq.token_ids.append(token)
        record = seq.record
        record.output_token_ids.append(token)
        record.token_ready_s.append(ready_s)
        if record.prefill_end_s is None:
            record.prefill_end_s = ready_s
        if seq.done:
            self.scheduler.release(seq)
            self._generators.pop(seq.seq_id, None)
            record.status, record.released_s = FINISHED, self.now()

    # -- workloads -----------------------------------------------------------------------
    def run(self, workload: list[Arrival], realtime: bool = False) -> list[RequestRecord]:
        """Open-loop: each arrival is added at its arrival_s (realtime) or all at once (as fast
        as possible); steps until every request is finished, rejected or cancelled. Under
        tensor parallelism rank 0's clock decides arrivals, so every rank schedules alike."""
        pending = sorted(workload, key=lambda a: a.arrival_s)
        self._start_s, self._observed_s = time.perf_counter(), 0.0
        added = []
        while pending or self.has_unfinished():
            due = sum(1 for a in pending if not realtime or a.arrival_s <= self.now())
            for _ in range(broadcast_int(due, self.model.tp, self.model.device)):
                added.append(self._add_arrival(pending.pop(0)))
            if self.has_unfinished():
                if not self.step().num_batched_tokens and not self.scheduler.running:
                    raise RuntimeError("scheduler stalled: waiting requests cannot be admitted")
            elif pending:
                time.sleep(max(0.0, pending[0].arrival_s - self.now()))
        return [r for r in self.records if r.request_id in {a.request_id for a in added}]

    def _add_arrival(self, arrival: Arrival) -> RequestRecord:
        """A prompt given as a count gets ids drawn from (seed, arrival_s, count), so the same
        workload gives the same prompts however it is split across runs."""
        prompt = arrival.prompt_tokens
        if isinstance(prompt, int):
            rng = random.Random(f"{arrival.seed}:{arrival.arrival_s!r}:{prompt}")
            prompt = [rng.randrange(self.model.spec.vocab_size) for _ in range(prompt)]
        record = self.add_request(list(prompt), arrival.output_tokens, arrival.temperature,
                                  arrival.seed)
        record.arrival_s = arrival.arrival_s
        return record


def windowed_everywhere(spec: ModelSpec) -> int | None:
    """The sliding window W when every layer is windowed, else None. The KV pool is one tensor
    for all layers, so a block is freed for every layer or none: a hybrid model (some full
    layers) keeps its full-attention blocks in its windowed layers too."""
    window = spec.attention.sliding_window_tokens
    if window and all(spec.layer_kind(n) == SLIDING for n in range(spec.num_layers)):
        return window
    return None


def _attention_work(chunks) -> tuple[int, int]:
    """(keys attended by the prefill tokens, context of the decode rows). A chunk of n tokens
    after c computed ones attends c + 1, ..., c + n keys: n x c + n (n + 1) / 2; a decode row
    (n == 1) attends its whole context c + 1."""
    prefill = sum(n * c + n * (n + 1) // 2 for c, n in
                  ((seq.num_computed_tokens, n) for seq, n in chunks) if n > 1)
    decode = sum(seq.num_computed_tokens + 1 for seq, n in chunks if n == 1)
    return prefill, decode
