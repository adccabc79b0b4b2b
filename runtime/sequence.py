"""Requests as the engine sees them: workload arrivals, running sequences, per-request records."""

from dataclasses import dataclass, field

from servecap.ledger.errors import SpecError

WAITING, RUNNING, FINISHED, REJECTED, CANCELLED, FAILED = (
    "waiting", "running", "finished", "rejected", "cancelled", "failed")
ENDED = (FINISHED, REJECTED, CANCELLED, FAILED)  # a request in one of these holds no block


@dataclass(frozen=True)
class Arrival:
    """One workload request: when it arrives (seconds from the start), its prompt (token ids, or
    a count for seeded random ids) and how many tokens to generate."""

    arrival_s: float
    prompt_tokens: tuple[int, ...] | int
    output_tokens: int
    temperature: float = 0.0
    seed: int = 0


@dataclass
class RequestRecord:
    """Times in seconds from the engine's start; token_ready_s has one entry per output token."""

    request_id: int
    num_prompt_tokens: int
    max_output_tokens: int
    status: str = WAITING
    reason: str = ""
    arrival_s: float | None = None
    accepted_s: float | None = None
    admitted_s: float | None = None
    prefill_start_s: float | None = None
    prefill_end_s: float | None = None
    token_ready_s: list[float] = field(default_factory=list)
    released_s: float | None = None
    num_preemptions: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache at admission
    num_prefill_chunks: int = 0  # forward passes that computed prompt (or recomputed) tokens
    output_token_ids: list[int] = field(default_factory=list)


@dataclass
class Sequence:
    """A running or waiting sequence: its tokens so far and how many have K/V in the pool."""

    seq_id: int
    token_ids: list[int]
    num_prompt_tokens: int
    max_output_tokens: int
    temperature: float
    seed: int
    record: RequestRecord
    num_computed_tokens: int = 0
    status: str = WAITING
    parallel: int = 1  # n: sequences sampled from this prompt (forked after prefill)
    state_slot: int | None = None  # hybrids: its slot in the state pool while it runs

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def max_tokens(self) -> int:
        """Prompt + every output token: the declared context this request grows to."""
        return self.num_prompt_tokens + self.max_output_tokens

    @property
    def num_uncomputed(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def done(self) -> bool:
        return self.num_output_tokens >= self.max_output_tokens


def check_request(prompt_token_ids: list[int], max_output_tokens: int, vocab_size: int,
                  temperature: float, parallel: int) -> None:
    """Bad requests are a SpecError naming the field, never a failure inside a step."""
    if not prompt_token_ids:
        raise SpecError("prompt_tokens", 0, "a request needs at least one prompt token")
    if max_output_tokens < 1:
        raise SpecError("output_tokens", max_output_tokens, "must be >= 1 token")
    bad = [t for t in prompt_token_ids if not 0 <= t < vocab_size]
    if bad:
        raise SpecError("prompt_tokens", bad[0], f"token ids must be in [0, {vocab_size})")
    if not 0 <= temperature < float("inf"):
        raise SpecError("temperature", temperature, "must be finite and >= 0 (0 is greedy)")
    if parallel < 1:
        raise SpecError("n", parallel, "must be >= 1 sequence per request")
