"""A layout's decode ceiling from the step model alone: output tokens/s no replica of it can
exceed, so a rung whose decode replicas are offered far more misses without a simulation.

Every decode step of n sequences, each holding at least c tokens of context, takes at least
step_s(0 prefill, n decodes, n x c context) (the step model is nondecreasing in sequences,
context and prefill tokens: a mixed step is never faster than its decodes alone), so a
replica decodes at most max over n of n / that step's seconds tokens/s; n runs up to
max_num_seqs and, without shared prefixes, to the sequences of c tokens its pool holds.
Steady state needs rate x (output tokens - 1) decode tokens/s (the first token comes from
the prefill). A rung is skipped only when that exceeds MARGIN x its ceiling: a queue that
grows by a third of its arrivals through the run leaves no window in which a run could meet
the SLOs, and the ceiling itself is an upper bound (the runs are slower still).
"""

from servecap.sim.step_model import step_s
from servecap.sim.workload import Lengths, Workload

MARGIN = 1.5
MAX_SEQUENCES = 4096  # max_num_seqs beyond which the ceiling stops looking (it only grows)


def shortest(lengths: Lengths) -> int:
    """The fewest tokens the distribution ever draws (every draw is clipped to min_tokens;
    a fixed length is its value)."""
    low = lengths.min_tokens
    if lengths.kind == "fixed":
        return max(low, min(lengths.value, lengths.max_tokens))
    if lengths.kind == "uniform":
        return max(low, lengths.low)
    if lengths.kind == "empirical" and lengths.values:
        return max(low, min(lengths.values))
    return low


def decode_ceiling_tps(coef, num_blocks: int, block_size_tokens: int, max_num_seqs: int,
                       context_tokens: int, shared_prefixes: bool) -> float:
    """Output tokens/s one replica never exceeds (see the module docstring)."""
    most = min(max_num_seqs, MAX_SEQUENCES)
    if not shared_prefixes:
        most = min(most, num_blocks * block_size_tokens // max(context_tokens, 1))
    return max((n / step_s(coef, 0, n, 0, n * context_tokens) for n in range(1, most + 1)),
               default=0.0)


def needed_decode_tps(workload: Workload, rate_per_s: float) -> float:
    """Decode tokens/s the rate asks for at least: every request's output beyond its first
    token, at the shortest output the workload draws."""
    return rate_per_s * max(shortest(workload.output) - 1, 0)


def first_feasible(ladder: list, ceiling_tps: float, needed_tps: float) -> int:
    """Index of the first rung whose decode replicas could keep up (len(ladder): none)."""
    for i, cand in enumerate(ladder):
        decoders = cand.decode if cand.disaggregated else cand.replicas
        if needed_tps <= MARGIN * decoders * ceiling_tps:
            return i
    return len(ladder)
