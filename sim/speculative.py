"""Speculative decoding on the roofline: where a draft model helps, and where it stops."""

from dataclasses import dataclass

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Plan, memory_ceiling

from .roofline import Coefficients, iteration_s

# vLLM's num_speculative_tokens is a handful (EAGLE 1-8, n-gram up to ~10); a longer draft
# only adds work: every draft token is a draft forward pass the simulation prices
MAX_DRAFT_LENGTH = 64


@dataclass(frozen=True)
class Speculation:
    """A draft proposes `draft_length` tokens per step, each accepted with probability
    `acceptance`; the target verifies all of them in one pass. `draft` prices the draft
    model's iterations on the same device."""

    draft_length: int
    acceptance: float
    draft: Coefficients
    max_batch: int | None = None  # vLLM's speculative_disable_by_batch_size

    def applies(self, num_decode: int) -> bool:
        return self.max_batch is None or num_decode <= self.max_batch

    def __post_init__(self) -> None:
        if isinstance(self.draft_length, bool) or not isinstance(self.draft_length, int) \
                or not 1 <= self.draft_length <= MAX_DRAFT_LENGTH:
            raise SpecError("--draft-length", self.draft_length, f"a whole number in 1.."
                            f"{MAX_DRAFT_LENGTH} (draft tokens per step)")
        if not 0 <= self.acceptance <= 1:
            raise SpecError("--acceptance", self.acceptance, "a probability in [0, 1]")


def expected_tokens_per_step(draft_length: int, acceptance: float) -> float:
    """(1 - a^(k+1)) / (1 - a): accepted draft tokens plus the target's own, per verification
    (Leviathan et al. 2023); k + 1 when every draft token is accepted."""
    if acceptance >= 1:
        return draft_length + 1.0
    return (1 - acceptance ** (draft_length + 1)) / (1 - acceptance)


def step_s(target: Coefficients, spec: Speculation, batch: int, context_tokens: int) -> float:
    """One speculative step for `batch` sequences of `context_tokens` each."""
    return _step_s(target, spec, batch, batch * context_tokens)


def _step_s(target: Coefficients, spec: Speculation, num_decode: int,
            kv_tokens_read: int) -> float:
    """k draft iterations of one token per sequence, then one target pass verifying k + 1
    tokens per sequence, all reading the sequences' KV. Seconds."""
    k, n = spec.draft_length, num_decode
    drafting = sum(iteration_s(spec.draft, n, kv_tokens_read + n * i) for i in range(k))
    return drafting + iteration_s(target, n * (k + 1), kv_tokens_read)


def decode_iteration_s(target: Coefficients, spec: Speculation, num_decode: int,
                       kv_tokens_read: int) -> float:
    """The simulator's price of one decode iteration under speculation, mean-field: a step
    yields E = expected_tokens_per_step tokens per sequence on average and the engine
    advances one token per sequence per iteration, so an iteration costs step / E (token gaps
    come out as averages; real streams arrive in bursts of accepted tokens)."""
    expected = expected_tokens_per_step(spec.draft_length, spec.acceptance)
    return _step_s(target, spec, num_decode, kv_tokens_read) / expected


def compare(target: Coefficients, spec: Speculation, batches: list[int],
            context_tokens: int) -> list[dict]:
    """Per batch size: tokens/s per sequence without and with speculation, and the speedup.
    Low batch is memory-bound, so verifying k + 1 tokens costs about one pass and speculation
    pays; at high batch the target is compute-bound and the extra verified tokens cost
    (k + 1)/E more than they return."""
    expected = expected_tokens_per_step(spec.draft_length, spec.acceptance)
    rows = []
    for batch in batches:
        plain = 1 / iteration_s(target, batch, batch * context_tokens)
        fast = expected / step_s(target, spec, batch, context_tokens)
        rows.append({"batch": batch, "plain_tokens_per_s_per_seq": plain,
                     "speculative_tokens_per_s_per_seq": fast, "speedup": fast / plain,
                     "plain_tokens_per_s": plain * batch,
                     "speculative_tokens_per_s": fast * batch})
    return rows


def break_even_batch(rows: list[dict]) -> int | None:
    """The smallest batch at which speculation no longer speeds decoding up (None: never)."""
    return next((r["batch"] for r in rows if r["speedup"] < 1), None)


def draft_fixed_bytes(draft: Plan) -> int:
    """What a resident draft adds to the target's fixed lines: its weights and weight
    metadata, bytes. Its runtime peak and safety reserve are not added: its activations live
    between the target's passes, and the safety reserve is the device's, counted once."""
    return draft.line("weights") + draft.line("weight_metadata")


def ceiling_with_draft(target: Plan, draft: Plan) -> dict:
    """The target's memory-only ceiling with the draft resident on the same device: the
    ledger's own ceiling (ledger.plan.memory_ceiling, requests) with the draft's weights and
    weight metadata added to the target's fixed lines (draft_fixed_bytes) and the draft's KV
    per request (same context, same block size) added to the target's. Both plans are one
    rank's, at one context."""
    draft_weights = draft_fixed_bytes(draft)
    per_request = target.kv_bytes_per_request + draft.kv_bytes_per_request
    return {"memory_ceiling_requests": memory_ceiling(
                target.device_bytes, target.fixed_bytes + draft_weights, per_request),
            "target_only_memory_ceiling_requests": target.memory_ceiling_requests,
            "context_tokens": target.serve.context_tokens,
            "draft_weights_bytes": draft_weights,
            "draft_kv_bytes_per_token": draft.kv_bytes_per_token,
            "draft_kv_bytes_per_request": draft.kv_bytes_per_request}


def batches_within(batches: list[int], ceiling: int) -> tuple[list[int], list[int]]:
    """(batches to compare, batches beyond the memory-only ceiling). When any is beyond, the
    ceiling itself is compared in their place: the largest batch the device holds."""
    if ceiling < 1:
        raise SpecError("--context", None, "room for one request: the target, the draft and "
                        "one request's KV of both do not fit on the device")
    fits = [b for b in batches if b <= ceiling]
    beyond = [b for b in batches if b > ceiling]
    if beyond and ceiling not in fits:
        fits.append(ceiling)
    return fits, beyond
