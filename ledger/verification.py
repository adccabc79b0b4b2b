"""Verification arithmetic: each ledger line predicted vs measured on a device, with a tolerance."""

from dataclasses import dataclass

from .plan import Plan

OK, VIOLATED, REPORTED = "ok", "violated", "reported"
FAILURE_TOLERANCE = "must not happen"  # a failure's line: no bytes to compare
NULL_BLOCKS = 1  # the pool's one padding block that block tables point at; never written


@dataclass(frozen=True)
class Measured:
    """What one verification run measured, int bytes. peak_used_bytes is everything charged to
    the device at the run's peak, the declared load and the ceiling probe (tensors, allocator
    slack and, on CUDA, non-torch); runtime_peak_bytes is the declared load's transients."""

    weights_bytes: int
    weight_metadata_bytes: int
    runtime_peak_bytes: int
    kv_pool_bytes: int
    kv_in_use_bytes: int
    non_torch_bytes: int
    allocator_slack_bytes: int
    peak_used_bytes: int
    ceiling_requests: int | None  # None: the ceiling probe was skipped (--no-probe)
    num_requests: int
    load_is_declared: bool = True  # False: a workload file's lengths, not context x concurrency
    failures: tuple["Failure", ...] = ()
    cuda_context_bytes: int = 0  # the CUDA context (CUDA only; 0 on the CPU)
    cuda_context_charged: bool = True  # False on an emulated device: it lives outside it
    # the ledger's KV for the load as it ran (kv.kv_in_use_for_load: windowed layers at the
    # larger of their decode hold and their own prompts' in-flight prefill); None: the line
    kv_load_bytes: int | None = None
    state_pool_bytes: int = 0  # hybrids: the state pool tensors (slots + null slot)
    state_in_use_bytes: int = 0  # the most slots the load held at once x state bytes a slot
    # why the ceiling probe measured nothing although it ran (it ran out of memory): the
    # predicted ceiling did not fit, so its verdict is violated; "" when it measured or was
    # skipped
    ceiling_failure: str = ""
    lora_bytes: int = 0  # the LoRA slots' tensors (--enable-lora)


@dataclass(frozen=True)
class Failure:
    """Something the run could not do (out of memory in a phase, a request that never finished,
    a rank that failed): always a violation, never a note. name: a stable key such as
    'out_of_memory_warmup'; detail: one line saying what happened."""

    name: str
    label: str
    detail: str


@dataclass(frozen=True)
class LineCheck:
    """One ledger line on the device: residual = measured - predicted."""

    line: str
    label: str
    predicted_bytes: int
    measured_bytes: int
    verdict: str
    tolerance: str
    detail: str = ""  # a failure's one-line account; "" for ledger lines

    @property
    def residual_bytes(self) -> int:
        return self.measured_bytes - self.predicted_bytes

    @property
    def residual_pct(self) -> float | None:
        """Residual as a share of the prediction, in percent; None when nothing was predicted."""
        if not self.predicted_bytes:
            return None
        return 100.0 * self.residual_bytes / self.predicted_bytes


@dataclass(frozen=True)
class Reconciliation:
    lines: tuple[LineCheck, ...]
    predicted_ceiling_requests: int
    measured_ceiling_requests: int | None  # None: not probed, or the probe failed
    ceiling_failure: str = ""  # the probe ran out of memory: not measured, and violated

    @property
    def ceiling_verdict(self) -> str:
        """violated when the probe ran out of memory (the predicted requests did not fit with
        their transients), reported when it was skipped, else measured == predicted."""
        if self.ceiling_failure:
            return VIOLATED
        if self.measured_ceiling_requests is None:
            return REPORTED
        return OK if self.measured_ceiling_requests == self.predicted_ceiling_requests \
            else VIOLATED

    @property
    def violations(self) -> tuple[str, ...]:
        """Names of the violated lines ('memory_ceiling' when the ceiling differs)."""
        names = [c.line for c in self.lines if c.verdict == VIOLATED]
        if self.ceiling_verdict == VIOLATED:
            names.append("memory_ceiling")
        return tuple(names)


def block_bytes(plan: Plan) -> int:
    """One paged block in every layer, K and V: kv_bytes_per_token x block_size_tokens."""
    return plan.kv_bytes_per_token * plan.serve.block_size_tokens


def kv_pool_blocks(plan: Plan, bytes_per_block: int | None = None,
                   extra_fixed_bytes: int = 0, unified: bool = False) -> int:
    """Blocks in what the plan leaves for KV: (device - weights - metadata - runtime peak -
    safety - extra - hybrids' state slots) // block bytes (the plan's, unless a caller's pool
    has its own block shape; extra: another resident model, e.g. a speculative draft's
    weights). At the plan's context these hold memory_ceiling_requests requests. unified: the
    states come out of the same blocks, per running request (vLLM's hybrid allocator; the
    simulator charges them at admission), so none are set aside. The one copy of this formula:
    the runtime's pool and the simulator's call it."""
    per_block = bytes_per_block if bytes_per_block is not None else block_bytes(plan)
    states = 0 if unified else state_pool_slots(plan) * plan.state_bytes_per_request
    return max(0, (plan.device_bytes - plan.fixed_bytes - extra_fixed_bytes - states)
               // per_block)


def kv_pool_bytes(plan: Plan) -> int:
    """The pool tensor the plan implies: (blocks + null block) x block bytes."""
    return (kv_pool_blocks(plan) + NULL_BLOCKS) * block_bytes(plan)


def state_pool_slots(plan: Plan) -> int:
    """Hybrids: one state slot for each request the plan's ceiling admits (a request holds one
    slot in every state layer, ledger/state.py); 0 without state layers. The KV pool takes what
    is left (kv_pool_blocks), which holds the ceiling's KV: device - fixed >= ceiling x (KV +
    state) per request."""
    return plan.memory_ceiling_requests if plan.state_bytes_per_request else 0


def state_pool_bytes(plan: Plan) -> int:
    """The state pool tensors the plan implies: (slots + null slot) x state bytes a request."""
    slots = state_pool_slots(plan)
    return (slots + NULL_BLOCKS) * plan.state_bytes_per_request if slots else 0


def reconcile(plan: Plan, measured: Measured) -> Reconciliation:
    """Every ledger line against the device; weights and pool exact, the rest within budgets."""
    checks = (
        _exact("weights", "weights", plan.line("weights"), measured.weights_bytes),
        _exact("weight_metadata", "weight metadata", plan.line("weight_metadata"),
               measured.weight_metadata_bytes),
        *_lora(plan, measured),
        _within("runtime_peak", "runtime peak", plan.line("runtime_peak"),
                measured.runtime_peak_bytes, "<= declared budget"),
        _exact("kv_pool", "KV pool tensor", kv_pool_bytes(plan), measured.kv_pool_bytes),
        _kv_in_use(plan, measured),
        *_states(plan, measured),
        _safety(plan, measured),
        LineCheck("non_torch", "non-torch", 0, measured.non_torch_bytes,
                  REPORTED, "reported (from safety)"),
        LineCheck("allocator_slack", "allocator slack", 0,
                  measured.allocator_slack_bytes, REPORTED,
                  "reported (from safety)"),
        *_context(measured),
        *failure_lines(measured.failures),
    )
    return Reconciliation(checks, plan.memory_ceiling_requests,
                          None if measured.ceiling_failure else measured.ceiling_requests,
                          measured.ceiling_failure)


def _lora(plan: Plan, measured: Measured) -> tuple[LineCheck, ...]:
    """The LoRA slots, exact: the runtime allocates the ledger's slices (ledger/lora.py)."""
    if not plan.line("lora_adapters") and not measured.lora_bytes:
        return ()
    return (_exact("lora_adapters", "LoRA adapter slots", plan.line("lora_adapters"),
                   measured.lora_bytes),)


def _context(measured: Measured) -> tuple[LineCheck, ...]:
    """The CUDA context, a non-torch line of its own (none on the CPU): charged to the device
    when the whole GPU is planned, reported only on an emulated (smaller) device, where the
    allocator's cap leaves it outside the emulated size."""
    if not measured.cuda_context_bytes:
        return ()
    where = "(from safety)" if measured.cuda_context_charged else "(outside the emulated device)"
    return (LineCheck("cuda_context", "CUDA context", 0, measured.cuda_context_bytes, REPORTED,
                      f"reported {where}"),)


def failure_lines(failures: tuple[Failure, ...]) -> tuple[LineCheck, ...]:
    """One violated line per distinct failure (the same failure twice is one line)."""
    seen: dict[str, Failure] = {}
    for failure in failures:
        seen.setdefault(failure.name, failure)
    return tuple(LineCheck(f.name, f.label, 0, 0, VIOLATED, FAILURE_TOLERANCE, f.detail)
                 for f in seen.values())


def _exact(key: str, label: str, predicted: int, measured: int) -> LineCheck:
    verdict = OK if measured == predicted else VIOLATED
    return LineCheck(key, label, predicted, measured, verdict, "exact")


def _within(key: str, label: str, predicted: int, measured: int, tolerance: str) -> LineCheck:
    return LineCheck(key, label, predicted, measured, OK if measured <= predicted else VIOLATED,
                     tolerance)


def _kv_in_use(plan: Plan, measured: Measured) -> LineCheck:
    """Peak blocks held under the load x block bytes. Under the declared load the last sampled
    token of a request is never fed back, so its slot may stay unwritten: up to one block per
    request below the ledger's Σ ceil(S_r / B) x block bytes. A workload file's requests are
    held to the ledger's figure as an upper bound only."""
    predicted, used = plan.line("kv_cache"), measured.kv_in_use_bytes
    if not measured.load_is_declared:
        return _within("kv_cache", "KV in use (peak)", predicted, used,
                       "<= ledger (workload lengths)")
    detail = ""
    if measured.kv_load_bytes is not None and measured.kv_load_bytes != predicted:
        detail = (f"windowed layers at the larger of the decode hold and the declared "
                  f"prompts' in-flight prefill (the plan's line, prompts of the whole context: "
                  f"{predicted:,} B)")
        predicted = measured.kv_load_bytes
    slack = plan.serve.concurrency * block_bytes(plan)
    ok = predicted - slack <= used <= predicted
    return LineCheck("kv_cache", "KV in use (peak)", predicted, used, OK if ok else VIOLATED,
                     "<= ledger, >= ledger - 1 block/request", detail)


def _states(plan: Plan, measured: Measured) -> tuple[LineCheck, ...]:
    """Hybrids: the state pool tensors, exact; the fixed state in use, exact under the declared
    load (each live request holds one slot of state_bytes_per_request), at most the ledger's
    with a workload file."""
    if not plan.state_bytes_per_request:
        return ()
    pool = _exact("state_pool", "state pool tensors", state_pool_bytes(plan),
                  measured.state_pool_bytes)
    if not measured.load_is_declared:
        return pool, _within("state_cache", "fixed state in use (peak)",
                             plan.line("state_cache"), measured.state_in_use_bytes,
                             "<= ledger (workload lengths)")
    return pool, _exact("state_cache", "fixed state in use (peak)", plan.line("state_cache"),
                        measured.state_in_use_bytes)


def _safety(plan: Plan, measured: Measured) -> LineCheck:
    """Headroom left at the run's peak (the declared load's or the ceiling probe's, whichever
    charged more): device - everything charged then. The reserve did its job when the headroom
    never went negative (non-torch and slack come out of it)."""
    headroom = plan.device_bytes - measured.peak_used_bytes
    return LineCheck("safety", "safety (headroom left)", plan.line("safety"), headroom,
                     OK if headroom >= 0 else VIOLATED, ">= 0")
