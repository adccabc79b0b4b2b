"""The engine's knobs (vLLM's names) and the per-step figures its hooks receive."""

from dataclasses import dataclass

from servecap.ledger.serve import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS


@dataclass(frozen=True)
class EngineConfig:
    """vLLM's knob names. reserve_full_context: see Scheduler."""

    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    enable_prefix_caching: bool = True
    reserve_full_context: bool = True
    # free blocks wholly out of the window when every layer is windowed (Scheduler)
    free_out_of_window: bool = True
    # the token budget a windowed request's in-flight prefill peak is counted with (the
    # ledger's line): max_num_batched_tokens unless a probe lifted it
    window_budget_tokens: int | None = None


DEFAULT_ENGINE_CONFIG = EngineConfig()


@dataclass(frozen=True)
class StepStats:
    """One step, for telemetry and for fitting step time against the work it did:
    num_context_tokens is the K/V tokens its attention read (Σ context after each chunk)."""

    step: int
    now_s: float
    step_s: float
    num_batched_tokens: int
    num_decode_tokens: int
    num_context_tokens: int
    num_running: int
    num_waiting: int
    num_free_blocks: int
    num_admitted: int
    num_preempted: int
    # the calibration's step sample (runtime/calibration.py): keys attended by the step's
    # prefill tokens, context of its decode sequences, sequences it computed for
    prefill_attention_tokens: int = 0
    decode_context_tokens: int = 0
    num_seqs: int = 0
