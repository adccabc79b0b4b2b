"""SchedulerConfig: the policy and its vLLM-named knobs, validated and frozen."""

from dataclasses import dataclass

from servecap.ledger.errors import SpecError
from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_WATERMARK,
)

from .speculative import Speculation

POLICIES = ("static", "continuous", "prefill-priority", "decode-priority", "chunked-prefill")
PREEMPTION_MODES = ("recompute", "swap")
SCHEDULING_ORDERS = ("fcfs", "priority")


@dataclass(frozen=True)
class SchedulerConfig:
    """static: fixed groups padded to the longest prompt and output, released together.
    continuous: FCFS, membership revisited every iteration, whole prompts join decodes.
    prefill-priority: a prefill-only iteration whenever a waiting prompt can be admitted.
    decode-priority: decodes run until waiting prompts have waited max_waiting_steps decode
    iterations or outnumber waiting_served_ratio x the running set (TGI's max_waiting_tokens
    and waiting_served_ratio); then one prefill-only iteration admits them.
    chunked-prefill: decodes first, then prompt chunks in the rest of the token budget.
    watermark: share of blocks kept free at admission (vLLM 0.01). speculation: a draft model
    speeds decode-only iterations (up to its max_batch); mixed iterations run without it.
    scheduling: fcfs, or priority (vLLM's --scheduling-policy priority: the waiting queue is
    ordered by tenant priority, then arrival, and preemption takes the lowest priority first;
    running requests are not preempted to admit higher-priority ones). seed: the step-time
    draws when the coefficients carry a spread (step_time_cv). concurrency: closed loop, this
    many requests in flight, the next sent as one finishes (None: open loop, as offered).
    num_scheduler_steps: vLLM V0's multi-step scheduling (--num-scheduler-steps, 0.6 - 0.7):
    the scheduler runs once per group of that many decode steps, so a prompt that arrives
    mid-group waits for the group to finish before its prefill (a prefill runs as one step:
    vllm/sequence.py init_multi_step_from_lookahead_slots gives prefills no lookahead
    slots), and each sequence's tokens stream out in bursts of the group. state_blocks:
    hybrids (Mamba / gated DeltaNet layers), the pool's blocks each running request's fixed
    state takes while it runs, whatever its length: vLLM's hybrid allocator keeps the states in
    the same pool as the attention pages (vllm/v1/core/single_type_kv_cache_manager.py
    MambaManager), so a short request is charged its state too. max_model_len: the context
    limit (None: none); a request whose prompt plus output tokens exceed it is rejected on
    arrival, never served, as vLLM's API refuses it with HTTP 400 (vLLM's
    vllm/entrypoints/openai/serving_engine.py _validate_input, at commit 7ded96b3: "This
    model's maximum context length is ..." when token_num + max_tokens > max_model_len)."""

    policy: str = "continuous"
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS
    watermark: float = DEFAULT_WATERMARK
    preemption_mode: str = "recompute"
    prefix_caching: bool = True
    max_time_s: float | None = None
    max_waiting_steps: int = 20
    waiting_served_ratio: float = 1.2
    speculation: Speculation | None = None
    scheduling: str = "fcfs"
    seed: int = 0
    concurrency: int | None = None
    num_scheduler_steps: int = 1
    state_blocks: int = 0
    max_model_len: int | None = None
    offload_tokens: int = 0  # a host KV offload tier's capacity (--kv-offloading-size): 0 none

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise SpecError("--policy", self.policy, "one of " + ", ".join(POLICIES))
        if self.scheduling not in SCHEDULING_ORDERS:
            raise SpecError("--scheduling", self.scheduling,
                            "one of " + ", ".join(SCHEDULING_ORDERS))
        if self.preemption_mode not in PREEMPTION_MODES:
            raise SpecError("--preemption", self.preemption_mode,
                            "one of " + ", ".join(PREEMPTION_MODES))
        for name, flag in (("max_num_batched_tokens", "--max-num-batched-tokens"),
                           ("max_num_seqs", "--max-num-seqs"),
                           ("block_size_tokens", "--block-size"),
                           ("max_waiting_steps", "max_waiting_steps"),
                           ("num_scheduler_steps", "--num-scheduler-steps")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(flag, value, "a whole number >= 1")
        if isinstance(self.state_blocks, bool) or not isinstance(self.state_blocks, int) \
                or self.state_blocks < 0:
            raise SpecError("state_blocks", self.state_blocks, "a whole number >= 0")
        if isinstance(self.offload_tokens, bool) or not isinstance(self.offload_tokens, int) \
                or self.offload_tokens < 0:
            raise SpecError("offload_tokens", self.offload_tokens, "a whole number >= 0")
        if not 0 <= self.watermark < 1:
            raise SpecError("--watermark", self.watermark, "a share of blocks in [0, 1)")
        if self.policy == "chunked-prefill" and self.max_num_batched_tokens < self.max_num_seqs:
            raise SpecError("--max-num-batched-tokens", self.max_num_batched_tokens,
                            f"chunked prefill needs >= --max-num-seqs ({self.max_num_seqs}) so "
                            "every running sequence decodes each iteration")
        if self.max_model_len is not None and (isinstance(self.max_model_len, bool) or not
                                               isinstance(self.max_model_len, int)
                                               or self.max_model_len < 1):
            raise SpecError("max_model_len", self.max_model_len, "a whole number >= 1")
        if not self.waiting_served_ratio > 0:
            raise SpecError("waiting_served_ratio", self.waiting_served_ratio, "must be > 0")
        if self.concurrency is not None and (isinstance(self.concurrency, bool) or not
                                             isinstance(self.concurrency, int)
                                             or self.concurrency < 1):
            raise SpecError("--concurrency", self.concurrency, "a whole number >= 1")
        if self.max_time_s is not None and not self.max_time_s > 0:
            raise SpecError("max_time_s", self.max_time_s, "must be > 0 seconds")

    def watermark_blocks(self, num_blocks: int) -> int:
        return int(self.watermark * num_blocks)

    def length_check(self):
        """too_long, or None where it refuses no request (no max_model_len): the engine then
        asks nothing per request."""
        return None if self.max_model_len is None else self.too_long

    def too_long(self, prompt_tokens: int, output_tokens: int) -> str | None:
        """Why a request is refused before it is queued (None: it is not): its prompt and
        output together exceed max_model_len, whatever the pool holds."""
        if self.max_model_len is None or prompt_tokens + output_tokens <= self.max_model_len:
            return None
        return f"longer than max_model_len {self.max_model_len:,} (prompt + output tokens)"
