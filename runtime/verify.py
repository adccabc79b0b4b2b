"""Run the plan on a device phase by phase, measure every ledger line, and reconcile the two.

    result = verify(spec, serve, VerifyOptions(device="cpu", device_bytes=16 * MiB))
    result.reconciliation.violations  # () when the ledger held on this device

Phases: baseline, weights, kv_pool (sized by the ledger; a hybrid's state pool beside it),
warmup (one profile request), peak
(the declared load, then the ceiling probe: more requests of the declared context than the
ledger says fit, as fast as possible), release.

Every failure is a finding with its own violated line (servecap.ledger.verification.Failure):
out of memory in a phase, a request that never finished. Under tensor parallelism a rank that
fails raises RankFailure, so it stops at once rather than leaving its peers in a collective.
"""

import gc
import os
import time
from contextlib import contextmanager

import torch

from servecap.ledger import dtypes
from servecap.ledger.engines import PLAIN_ENGINE, EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import Shard, kv_in_use_for_load
from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Plan, build_plan, with_device
from servecap.ledger.serve import ServeSpec
from servecap.ledger.verification import (
    Failure,
    Measured,
    kv_pool_bytes,
    reconcile,
    state_pool_bytes,
    state_pool_slots,
)
from servecap.sim.rank_model import attention_flops_per_token_pair

from .calibration import (
    NOMINAL_BANDWIDTH_BYTES_PER_S,
    NOMINAL_FLOPS_PER_S,
    StepClock,
    calibrate,
    calibration_loads,
)
from .ceiling_probe import CEILING_PROBE_EXTRA, ceiling_failure, probe_output_tokens
from .engine import Engine, EngineConfig, windowed_everywhere
from .kv_pool import KVPool, blocks_for_plan
from .latency import latency_report
from .lora import attach_lora
from .model import check_buildable
from .parallel import SINGLE, TensorParallel, check_split
from .progress import Progress, finished_counter
from .provenance import benchmark_record
from .sequence import FINISHED, Arrival
from .sim_check import simulated_vs_measured
from .state_pool import StatePool
from .telemetry import Snapshot, probe_for
from .verify_result import (
    RankFailure,
    VerifyOptions,
    VerifyResult,
)
from .weights import config_options, load_decoder, random_decoder


def verify(spec: ModelSpec, serve: ServeSpec, options: VerifyOptions,
           tp: TensorParallel = SINGLE, progress: Progress | None = None) -> VerifyResult:
    """Plan this rank's shard against the (emulated) device size, then measure each phase."""
    check_buildable(spec)
    check_split(spec, tp)
    probe = probe_for(options.device, options.device_bytes or None)
    plan = build_plan(spec, with_device(serve, probe.device_bytes), shard=Shard(tp.size),
                      engine=_collectives(probe.kind, tp.size))
    if blocks_for_plan(spec, plan, tp.size) < 1:
        raise SpecError("--device-memory", f"{plan.device_bytes:,} B", "weights, metadata, "
                        f"runtime peak and safety ({plan.fixed_bytes:,} B) leave no room for "
                        "one KV block: declare a larger device or smaller budgets")
    return _Run(spec, plan, probe, options, tp, progress).execute()


def _collectives(kind: str, tp_size: int) -> EngineSpec:
    """gloo on the CPU keeps its buffers in ordinary host memory outside the emulated device:
    the ledger's communication line is declared 0 there; on CUDA the NCCL estimate stands."""
    return EngineSpec(comm_buffer_bytes=0) if kind == "cpu" and tp_size > 1 else PLAIN_ENGINE


class _Run:
    """One verification: owns the model, the pool, the phase snapshots and the failures."""

    def __init__(self, spec: ModelSpec, plan: Plan, probe, options: VerifyOptions,
                 tp: TensorParallel, progress: Progress | None = None) -> None:
        self.spec, self.plan, self.probe, self.options, self.tp = spec, plan, probe, options, tp
        self.progress = progress or (lambda phase, done, total: None)
        self.torch_device = "cpu" if probe.kind == "cpu" else str(probe.device)
        self.phases: list[Snapshot] = [probe.snapshot("baseline")]
        self.notes: list[str] = []
        self.failures: list[Failure] = []
        self.clock = StepClock()
        self.states: StatePool | None = None  # hybrids' state pool (sized by the ledger)
        self.state_slots_in_use = 0  # the most the declared load held at once
        self.lora_bytes = 0  # the LoRA slots' tensors (runtime/lora.py), when planned

    def execute(self) -> VerifyResult:
        model = self._load_weights()
        pool = self._allocate_pool()
        self._warm_up(model, pool)
        self.probe.reset_peak()
        records, wall_s, blocks_in_use = self._declared_load(model, pool)
        kv_in_use = blocks_in_use * pool.block_bytes
        # the ceiling probe lifts max_num_seqs, so its steps may be wider than the plan's:
        # the runtime-peak line is the declared load's, the headroom the whole run's lowest
        transient = self.probe.transient_peak_bytes()
        probe = self._ceiling_probe(model, pool) if self.options.probe_ceiling else {}
        run_peak = self.probe.transient_peak_bytes()
        peak = self._snap("peak")
        self._calibration_sweep(model, pool)
        measured = self._measured(model, pool, kv_in_use, probe, peak, len(records),
                                  transient, run_peak)
        num_blocks = pool.num_blocks
        del model, pool
        self._release()
        latency, calibration = latency_report(records, wall_s), self._calibration()
        latency["simulated_vs_measured"] = simulated_vs_measured(
            self.plan, self._arrivals(), self._realtime(), calibration["coefficients"],
            num_blocks, latency, calibration.get("underdetermined"))
        record = benchmark_record(self.spec, self.plan, self.options, self.probe, self.tp)
        record["realtime"] = self._realtime()
        if self.probe.kind == "cuda":
            record["allocator_settings"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF",
                                                          self.probe.allocator_settings)
        return VerifyResult(self.spec, self.plan, measured, reconcile(self.plan, measured),
                            tuple(self.phases), latency, record, calibration,
                            tuple(self.notes), probe, tuple(records))

    def _fail(self, name: str, label: str, detail: str) -> None:
        """A finding; under tensor parallelism it ends this rank (its peers are stopped)."""
        failure = Failure(name, label, detail)
        if self.tp.size > 1:
            raise RankFailure(Failure(name, f"rank {self.tp.rank}: {label}",
                                      f"rank {self.tp.rank}: {detail}"))
        self.failures.append(failure)

    def _out_of_memory(self, key: str, what: str, exc: BaseException) -> None:
        self._fail(f"out_of_memory_{key}", f"out of memory ({what})",
                   f"out of memory during {what}: {str(exc).splitlines()[0]}")

    def _snap(self, phase: str) -> Snapshot:
        snap = self.probe.snapshot(phase)
        self.phases.append(snap)
        return snap

    def _load_weights(self):
        opts, serve = self.options, self.plan.serve
        self.progress("weights", 0, 1)
        with _allocating("the weights", self.plan.line("weights")):
            model = (load_decoder(self.spec, opts.weights_dir, serve.weight_dtype,
                                  self.torch_device, self.tp) if opts.weights_dir else
                     random_decoder(self.spec, serve.weight_dtype, self.torch_device, opts.seed,
                                    config_options(opts.config_path, self.spec.model_type),
                                    self.tp))
        self.probe.add_resident(model.weight_bytes, "weights")
        if serve.lora is not None:
            with _allocating("the LoRA slots", self.plan.line("lora_adapters")):
                self.lora_bytes = attach_lora(model, serve.lora, self.tp).tensor_bytes
            self.probe.add_resident(self.lora_bytes, "LoRA slots")
        self._snap("weights")
        self.progress("weights", 1, 1)
        if self.tp.size > 1:
            self.notes.append(f"rank {self.tp.rank} of {self.tp.size}: the weights line is this "
                              "rank's shard: q/k/v/o, MLP and vocabulary slices, replicated norms")
        return model

    def _allocate_pool(self) -> KVPool:
        serve = self.plan.serve
        self.progress("kv_pool", 0, 1)
        with _allocating("the KV pool", kv_pool_bytes(self.plan)):
            pool = KVPool(self.spec, blocks_for_plan(self.spec, self.plan, self.tp.size),
                          serve.block_size_tokens, serve.kv_dtype, self.torch_device,
                          self.tp.size)
        self.probe.add_resident(pool.tensor_bytes, "KV pool")
        if self.spec.state_layers:
            with _allocating("the state pool", state_pool_bytes(self.plan)):
                self.states = StatePool(self.spec, state_pool_slots(self.plan),
                                        self.torch_device, self.tp.size)
            self.probe.add_resident(self.states.tensor_bytes, "state pool")
        self._snap("kv_pool")
        self.progress("kv_pool", 1, 1)
        return pool

    def _engine(self, model, pool, max_num_seqs: int | None = None,
                reserve_full_context: bool = True, budget: int | None = None) -> Engine:
        """Prefix caching only for a replayed workload: the declared load and the probe are
        distinct requests the ledger plans without sharing, and with small blocks random
        prompts would share their first blocks by chance (1-token blocks: 1 in the vocab)."""
        serve = self.plan.serve
        config = EngineConfig(max_num_seqs=max_num_seqs or serve.max_num_seqs,
                              max_num_batched_tokens=budget or serve.max_num_batched_tokens,
                              reserve_full_context=reserve_full_context,
                              window_budget_tokens=serve.max_num_batched_tokens,
                              enable_prefix_caching=bool(self.options.workload))
        return Engine(model, pool, config, self.states)

    def _calibration_sweep(self, model, pool: KVPool) -> None:
        """calibration_loads' short loads, each alone, after the peak is measured: steps of
        the shapes the declared load does not have, for the step-model fit."""
        serve = self.plan.serve
        capacity = pool.num_blocks * serve.block_size_tokens
        batch = max(1, min(serve.concurrency, serve.max_num_seqs))
        for arrivals in calibration_loads(serve.context_tokens, batch, capacity):
            engine = self._engine(model, pool, max_num_seqs=len(arrivals))
            engine.step_hooks.append(self.clock)
            self._run(engine, list(arrivals), "calibration", "the calibration sweep")

    def _calibration(self) -> dict:
        """The simulator's step-model fit of the declared load's steps and the calibration
        sweep's (the probe's are another load, at the memory limit), from this rank's ledger
        bytes, FLOPs and attention."""
        plan = self.plan
        constants = {"weights_bytes": plan.line("weights") + plan.line("weight_metadata"),
                     "kv_bytes_per_token": plan.kv_bytes_per_token,
                     "flops_per_token": 2 * plan.active_parameters,
                     "attention_flops_per_token_pair": attention_flops_per_token_pair(
                         self.spec, self.spec.num_layers, self.tp.size),
                     "bandwidth_bytes_per_s": NOMINAL_BANDWIDTH_BYTES_PER_S,
                     "flops_per_s": NOMINAL_FLOPS_PER_S}
        return calibrate(self.clock.samples, constants)

    def _counting(self, phase: str):
        """The probe's counting context; a starved phase (forced failure) gets no room."""
        counter = self.probe.counting()
        if self.options.starve == (self.tp.rank, phase) and hasattr(counter, "cap_bytes"):
            counter.cap_bytes = 0
        return counter

    def _warm_up(self, model, pool: KVPool) -> None:
        """The engine's profile step: one prompt as long as a step or the context allows, logits
        for max_num_seqs rows. Kernels load and workspaces appear before measuring."""
        serve = self.plan.serve
        engine = Engine(model, pool, EngineConfig(
            max_num_seqs=serve.max_num_seqs,
            max_num_batched_tokens=min(serve.max_num_batched_tokens, serve.context_tokens)),
            self.states)
        self.progress("warmup", 0, 1)
        try:
            with self._counting("warmup"):
                engine.profile_run()
        except (MemoryError, torch.OutOfMemoryError) as exc:
            self._out_of_memory("warmup", "warm-up", exc)
        self._snap("warmup")
        self.progress("warmup", 1, 1)

    def _declared_load(self, model, pool: KVPool):
        engine = self._engine(model, pool,
                              reserve_full_context=self.options.reserve_full_context)
        engine.step_hooks.append(self.clock)
        start = time.perf_counter()
        what = "the replayed load" if self.options.workload else "the declared load"
        records, _ = self._run(engine, list(self._arrivals()), "declared_load", what,
                               self._realtime())
        self.state_slots_in_use = engine.max_state_slots_in_use
        return records, time.perf_counter() - start, engine.max_blocks_in_use

    def _realtime(self) -> bool:
        return self.options.realtime and bool(self.options.workload)

    def _arrivals(self) -> tuple[Arrival, ...]:
        if self.options.workload:
            return self.options.workload
        return self._full_context(self.plan.serve.concurrency, self.options.output_tokens)

    def _full_context(self, count: int, output_tokens: int) -> tuple[Arrival, ...]:
        """count requests that each grow to exactly the declared context; distinct seeds give
        distinct prompts, so nothing is shared through the prefix cache."""
        context = self.plan.serve.context_tokens
        output = max(1, min(output_tokens, context - 1))
        return tuple(Arrival(0.0, context - output, output, seed=self.options.seed + i + 1)
                     for i in range(count))

    def _ceiling_probe(self, model, pool: KVPool) -> dict:
        """The most requests of the declared context resident at once, memory the only limit:
        max_num_seqs is lifted, and each request generates long enough that none finishes
        before the step budget has admitted every one that fits (so admission never races
        completion). Every request must still complete. A ceiling past the step's token budget
        lifts the budget too (as vLLM needs max_num_batched_tokens >= max_num_seqs): decodes
        alone would spend it and admit no more."""
        count = self.plan.memory_ceiling_requests + CEILING_PROBE_EXTRA
        budget = max(self.plan.serve.max_num_batched_tokens, count + 1)
        engine = self._engine(model, pool, max_num_seqs=count, budget=budget)
        output = probe_output_tokens(count, self.plan.serve.context_tokens, budget,
                                     self.options.output_tokens)
        records, oom = self._run(engine, list(self._full_context(count, output)),
                                 "ceiling_probe", "the ceiling probe")
        resident = engine.max_resident_requests
        out = {"num_requests": count, "output_tokens": output, "resident_requests": resident,
               "limited_by": self._limit(oom, resident, count, pool),
               "num_finished": sum(1 for r in records if r.status == FINISHED),
               "out_of_memory": oom}
        refused = getattr(self.probe, "refused_bytes", lambda: None)() if oom else None
        if refused is not None:
            out["refused_bytes"] = refused  # the allocation the emulated device refused
        return out

    def _limit(self, oom: bool, resident: int, count: int, pool: KVPool) -> str:
        """What stopped the probe: memory (transients, the device) or the pool's blocks; a
        residency below what the blocks hold means admission raced completion instead."""
        if oom:
            return "device memory" if self.probe.kind == "cuda" else "runtime transients"
        if resident >= count:
            return "none (every probe request was resident)"
        if self.states is not None and resident >= self.states.num_slots:
            return "state slots"
        per_request = self.plan.kv_bytes_per_request // pool.block_bytes
        if per_request and resident >= pool.num_blocks // per_request:
            return "KV blocks"
        return "admission (requests finished before the pool filled; not memory)"

    def _run(self, engine: Engine, arrivals: list[Arrival], key: str, what: str,
             realtime: bool = False) -> tuple[list, bool]:
        """Run under the probe: (records, ran out of memory). Out of (emulated) device memory
        and requests that never finish are findings."""
        oom = False
        engine.step_hooks.append(finished_counter(engine, key, len(arrivals), self.progress))
        try:
            with self._counting(key) as counter:
                if hasattr(counter, "fold_every"):  # the CPU counter's profiler stays bounded
                    engine.step_hooks.append(counter.fold_every)
                records = engine.run(arrivals, realtime=realtime)
        except (MemoryError, torch.OutOfMemoryError) as exc:
            self._out_of_memory(key, what, exc)
            records, oom = list(engine.records), True
        unfinished = len(arrivals) - sum(1 for r in records if r.status == FINISHED)
        if unfinished:
            reasons = [r.reason for r in records if r.status != FINISHED and r.reason]
            why = f"; first: {reasons[0]}" if reasons else ""
            self._fail(f"unfinished_{key}", f"unfinished requests ({what})",
                       f"{unfinished} of {len(arrivals)} requests of {what} did not "
                       f"finish{why}")
        return records, oom

    def _measured(self, model, pool: KVPool, kv_in_use: int, probe: dict, peak: Snapshot,
                  num_requests: int, transient: int, run_peak: int) -> Measured:
        """transient: the declared load's peak above the resident tensors (the runtime-peak
        line); run_peak: the whole run's, the ceiling probe's too (the headroom's)."""
        slack = self.probe.slack_bytes()
        non_torch = peak.non_torch_bytes or 0
        context = self.probe.context_bytes()
        charged_context = context if self.probe.charges_context() else 0
        states = self.states.tensor_bytes if self.states else 0
        resident = model.weight_bytes + pool.tensor_bytes + states + self.lora_bytes
        return Measured(
            weights_bytes=model.weight_bytes, weight_metadata_bytes=0,
            runtime_peak_bytes=transient, kv_pool_bytes=pool.tensor_bytes,
            kv_in_use_bytes=kv_in_use, non_torch_bytes=max(0, non_torch - context),
            allocator_slack_bytes=slack,
            peak_used_bytes=resident + max(transient, run_peak) + slack
            + max(0, non_torch - context) + charged_context,
            ceiling_requests=probe.get("resident_requests"),
            ceiling_failure=ceiling_failure(probe), num_requests=num_requests,
            load_is_declared=not self.options.workload, failures=tuple(self.failures),
            cuda_context_bytes=context, cuda_context_charged=bool(charged_context),
            kv_load_bytes=self._kv_load_bytes(), state_pool_bytes=states,
            state_in_use_bytes=self.state_slots_in_use * self.plan.state_bytes_per_request,
            lora_bytes=self.lora_bytes)

    def _kv_load_bytes(self) -> int | None:
        """The ledger's KV for the declared load with its own prompt lengths, where the runtime
        frees out-of-window blocks (every layer windowed): a prompt that fits the window
        leaves only the decode hold, a longer one holds its prefill in flight."""
        if self.options.workload or windowed_everywhere(self.spec) is None:
            return None
        serve = self.plan.serve
        bits = dtypes.lookup(serve.kv_dtype, "kv_dtype", dtypes.KV_DTYPES).bits
        load = [(a.prompt_tokens, a.prompt_tokens + a.output_tokens) for a in self._arrivals()]
        return kv_in_use_for_load(self.spec, bits, load, serve.block_size_tokens,
                                  serve.max_num_batched_tokens, Shard(self.tp.size))

    def _release(self) -> None:
        gc.collect()
        if self.probe.kind == "cuda":
            torch.cuda.empty_cache()
        self.probe.release_resident()
        self._snap("release")


@contextmanager
def _allocating(what: str, num_bytes: int):
    """A resident allocation the host or device refuses is a clear error, not a traceback."""
    try:
        yield
    except (MemoryError, RuntimeError) as exc:
        if "alloc" not in str(exc).lower() and "out of memory" not in str(exc).lower():
            raise
        raise SpecError("--device-memory", f"{num_bytes:,} B", f"could not allocate {what} "
                        "the ledger sized on this machine; emulate a smaller device") from None
