"""vLLM's default max_num_batched_tokens and max_num_seqs, by release, device and entry point
(vllm/engine/arg_utils.py at each tag): the one rule both the memory plan's profile pass and the
simulated scheduler read. Keyed by release, not by ledger/vllm_versions.py's memory rows: the
v0.8.0 row covers 0.8.0 - 0.9.1, whose batch defaults changed three times."""

from dataclasses import dataclass

from .units import GiB

SERVE, LLM = "serve", "llm"  # vLLM's usage contexts: OPENAI_API_SERVER and LLM_CLASS
LONG_CONTEXT = 32_768  # V0 turns on chunked prefill above this max_model_len
V0_CHUNKED_TOKENS = {(0, 6): 512}  # SchedulerConfig's chunked default; 2048 from 0.7
BIG_GPU = 70 * GiB  # arg_utils: >= 70 GiB (and not an A100) gets the larger batch defaults
BIG_GPU_EXCEPT = "A100"  # arg_utils: an A100 80GB keeps the smaller defaults (from 0.9.0)
SEQS_DEFAULT = 256  # max_num_seqs by default: V0, and V1 below BIG_GPU (or on an A100)
SEQS_DEFAULT_BIG_GPU = 1024  # V1's max_num_seqs by default on a BIG_GPU
# V1's max_num_batched_tokens by default, by (a BIG_GPU, usage context)
BATCHED_TOKENS = {(True, SERVE): 8192, (True, LLM): 16384, (False, SERVE): 2048, (False, LLM): 8192}
HUGE_GPU = 160 * GiB  # from 0.28 (BY_MEMORY_160): HUGE_GPU_TOKENS for both entry points
HUGE_GPU_TOKENS = 16384

# how a release tells the larger defaults' GPUs from the rest
BY_NAME = "by-name"  # 'h100' or 'h200' in the device name gets the larger defaults
BY_MEMORY = "by-memory"  # >= 70 GiB (0.8.5) gets them
BY_MEMORY_NOT_A100 = "by-memory-not-a100"  # >= 70 GiB and not an A100 (vLLM PR #17885)
BY_MEMORY_160 = "by-memory-160"  # >= 160 GiB (B200/B300) gets 16384 tokens for the server too
ARGS = "vllm/engine/arg_utils.py"


@dataclass(frozen=True)
class BatchRule:
    """One V1 release's rule, from `version` up to the next: how the larger defaults' GPUs are
    told (`kind`), and max_num_seqs where every GPU got the same (0.8.0 - 0.8.3)."""

    version: tuple[int, ...]
    tag: str
    kind: str
    source: str
    seqs_everywhere: int | None = None


RULES: tuple[BatchRule, ...] = (
    BatchRule((0, 8, 0), "v0.8.0", BY_NAME,
              f"{ARGS} _set_default_args_v1: 16384 (LLM) / 8192 (server) batched tokens if "
              "'h100' or 'h200' is in the device name, else 8192 / 2048; max_num_seqs 1024",
              seqs_everywhere=1024),
    BatchRule((0, 8, 4), "v0.8.4", BY_NAME,
              f"{ARGS} _set_default_args_v1: max_num_seqs 1024 on H100/H200 (by name), else 256"),
    BatchRule((0, 8, 5), "v0.8.5", BY_MEMORY,
              f"{ARGS} _set_default_args_v1: device_memory >= 70 GiB: 16384 / 8192 batched "
              "tokens and 1024 sequences, else 8192 / 2048 and 256"),
    BatchRule((0, 9, 0), "v0.9.0", BY_MEMORY_NOT_A100,
              f"{ARGS} _set_default_args_v1: >= 70 GiB and not an A100 (PR #17885) for the "
              "larger defaults"),
    BatchRule((0, 28, 0), "v0.28.0", BY_MEMORY_160,
              f"{ARGS} _set_default_max_num_seqs_and_batched_tokens_args: >= 160 GiB "
              "('B200/B300'): 16384 batched tokens for the server too"),
)


def rule_for(version: tuple[int, ...]) -> BatchRule:
    """The rule covering `version` (the last at or before it; V1's first before 0.8)."""
    key = tuple(version) + (0,) * (3 - len(version))
    rules = [r for r in RULES if r.version <= key]
    return rules[-1] if rules else RULES[0]


@dataclass(frozen=True)
class ReleaseBatch:
    """A V1 release's defaults on one device and entry point, the rule they came from and the
    device's class in words ('a >= 70 GiB GPU, not an A100')."""

    tokens: int
    seqs: int
    rule: BatchRule
    size: str


def release_batch(version: tuple[int, ...], device_bytes: int, device_label: str,
                  entrypoint: str = SERVE) -> ReleaseBatch:
    """The release's max_num_batched_tokens and max_num_seqs for this device and entry point
    (LLM: the LLM class; SERVE: the OpenAI server), as its arg_utils.py sets them."""
    rule = rule_for(version)
    name = device_label.lower()
    not_excepted = BIG_GPU_EXCEPT.lower() not in name
    big = {BY_NAME: "h100" in name or "h200" in name, BY_MEMORY: device_bytes >= BIG_GPU,
           BY_MEMORY_NOT_A100: device_bytes >= BIG_GPU and not_excepted,
           BY_MEMORY_160: device_bytes >= BIG_GPU and not_excepted}[rule.kind]
    huge = rule.kind == BY_MEMORY_160 and device_bytes >= HUGE_GPU
    tokens = HUGE_GPU_TOKENS if huge else BATCHED_TOKENS[(big, entrypoint)]
    seqs = rule.seqs_everywhere or (SEQS_DEFAULT_BIG_GPU if big or huge else SEQS_DEFAULT)
    if huge:
        size = f"a >= {HUGE_GPU // GiB} GiB GPU"
    elif big:
        size = "an H100/H200 (by name)" if rule.kind == BY_NAME \
            else f"a >= {BIG_GPU // GiB} GiB GPU" \
            + ("" if rule.kind == BY_MEMORY else f", not an {BIG_GPU_EXCEPT}")
    elif device_bytes >= BIG_GPU and rule.kind not in (BY_NAME, BY_MEMORY):
        size = f"an {BIG_GPU_EXCEPT}, which keeps the smaller GPUs' defaults"
    else:
        size = "a smaller GPU"
    return ReleaseBatch(tokens, seqs, rule, size)


@dataclass(frozen=True)
class Batch:
    """vLLM's max_num_batched_tokens and max_num_seqs for the profile pass, and why."""

    tokens: int
    seqs: int
    how: str


def batch_defaults(formula: str, version: tuple[int, ...], device_bytes: int, device_label: str,
                   max_model_len: int, entrypoint: str = SERVE, tokens: int | None = None,
                   seqs: int | None = None) -> Batch:
    """The batch vLLM `version` (its engine: formula 'v0' or 'v1') profiles and schedules with:
    V1 as release_batch; V0 profiles max(max_model_len, 2048) tokens, or its chunked default
    above 32K. Declared tokens or seqs replace the defaults."""
    if formula == "v0":
        if tokens is None:
            chunked = max_model_len > LONG_CONTEXT
            tokens = V0_CHUNKED_TOKENS.get(tuple(version[:2]), 2048) if chunked \
                else max(max_model_len, 2048)
            why = "V0 chunked prefill above 32K" if chunked else "V0: max(max_model_len, 2048)"
        else:
            why = "declared"
        return Batch(tokens, seqs or SEQS_DEFAULT, why)
    found = release_batch(version, device_bytes, device_label, entrypoint)
    why = f"V1 {entrypoint} default from {found.rule.tag} on {found.size}"
    return Batch(tokens or found.tokens, seqs or found.seqs,
                 why if tokens is None or seqs is None else "declared")


def seqs_default_rule() -> str:
    """The newest release's max_num_seqs rule in words, from the constants release_batch
    reads: '256, or 1,024 on a >= 70 GiB GPU other than an A100'."""
    return (f"{SEQS_DEFAULT:,}, or {SEQS_DEFAULT_BIG_GPU:,} on a >= {BIG_GPU // GiB} GiB GPU "
            f"other than an {BIG_GPU_EXCEPT}")


def tokens_default_rule(entrypoint: str = SERVE) -> str:
    """The newest release's max_num_batched_tokens rule for one entry point in words, from the
    constants release_batch reads: '8,192 on a >= 70 GiB GPU other than an A100 (16,384 on a
    >= 160 GiB GPU from v0.28.0), else 2,048'."""
    huge = next((r.tag for r in RULES if r.kind == BY_MEMORY_160), None)
    tier = f" ({HUGE_GPU_TOKENS:,} on a >= {HUGE_GPU // GiB} GiB GPU from {huge})" if huge else ""
    return (f"{BATCHED_TOKENS[(True, entrypoint)]:,} on a >= {BIG_GPU // GiB} GiB GPU other "
            f"than an {BIG_GPU_EXCEPT}{tier}, else {BATCHED_TOKENS[(False, entrypoint)]:,}")
