"""The ceiling probe's own rules: how many requests it sends past the ledger's ceiling, how
long each runs so they are all resident at once, and what an out-of-memory in it means."""

CEILING_PROBE_EXTRA = 2  # requests beyond the ledger's ceiling: admission must stop before them


def ceiling_failure(probe: dict) -> str:
    """Why a probe that ran measured no ceiling: out of memory before the engine stopped
    admitting on blocks alone, so the predicted requests did not fit with their transients."""
    if not probe.get("out_of_memory"):
        return ""
    return (f"not measured: the ceiling probe ran out of memory with "
            f"{probe['resident_requests']} of {probe['num_requests']} requests resident "
            "(out_of_memory_ceiling_probe)")


def probe_output_tokens(count: int, context_tokens: int, max_num_batched_tokens: int,
                        output_tokens: int) -> int:
    """Output tokens per probe request so that the first admitted request is still decoding
    when the last one that fits is admitted: admitting count requests of the context takes
    about count x context / (budget - count) steps (decodes take one budget token each), plus
    two steps' margin; never the whole context (a prompt needs one token)."""
    steps = -(-count * context_tokens // max(1, max_num_batched_tokens - count)) + 2
    return max(1, min(context_tokens - 1, max(output_tokens, steps)))
