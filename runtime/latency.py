"""Per-request latency from the engine's records, on the simulator's clock and definitions.

Each record becomes the simulator's per-request state (servecap.sim.state.Seq), so queue delay,
TTFT, ITL, TPOT and end-to-end are computed by the very function `servecap simulate` uses
(servecap.sim.metrics.latency): time zero of a request is its arrival, percentiles are nearest
rank, every gap between consecutive tokens is one ITL sample. The same Seqs feed the
simulator's --records and --token-times writers.
"""

from servecap.sim.metrics import PERCENTILE_METHOD, latency, quantiles
from servecap.sim.sampling import Request
from servecap.sim.state import DONE, REJECTED, RUNNING, WAITING, Seq

from .sequence import CANCELLED, FINISHED, RequestRecord
from .sequence import REJECTED as ENGINE_REJECTED
from .sequence import RUNNING as ENGINE_RUNNING

STATES = {FINISHED: DONE, ENGINE_REJECTED: REJECTED, ENGINE_RUNNING: RUNNING,
          CANCELLED: "cancelled"}  # the simulator never cancels; the engine's word stands


def arrival_s(record: RequestRecord) -> float:
    """The request's time zero: its arrival in the workload or trace; a request added directly
    (Engine.add_request) arrives when it is accepted."""
    return record.accepted_s if record.arrival_s is None else record.arrival_s


def as_seq(record: RequestRecord) -> Seq:
    """The record in the simulator's terms; every output token is kept in prefill_token_s
    (the engine keeps each token's ready time, so no decode timeline is needed)."""
    seq = Seq(Request(record.request_id, arrival_s(record), record.num_prompt_tokens,
                      record.max_output_tokens))
    seq.state, seq.reason = STATES.get(record.status, WAITING), record.reason
    seq.admitted_s, seq.release_s = record.admitted_s, record.released_s
    seq.prefill_start_s, seq.prefill_end_s = record.prefill_start_s, record.prefill_end_s
    seq.prefill_token_s = list(record.token_ready_s)
    seq.last_token_s = record.token_ready_s[-1] if record.token_ready_s else 0.0
    seq.preemptions, seq.prefix_hit_tokens = record.num_preemptions, record.num_cached_tokens
    seq.generated = len(record.token_ready_s)
    seq.chunks = record.num_prefill_chunks
    return seq


def itl_pairs(seqs: list[Seq]) -> list[tuple[float, int]]:
    """Every gap between consecutive tokens of a completed request, one sample each."""
    return [(b - a, 1) for s in seqs if s.state == DONE
            for a, b in zip(s.prefill_token_s, s.prefill_token_s[1:], strict=False)]


def latency_report(records: list[RequestRecord], wall_s: float) -> dict:
    """Every finished request's times and the load's percentiles (ms) and throughput."""
    seqs = [as_seq(r) for r in records]
    done = [s for s in seqs if s.state == DONE and s.prefill_token_s]
    return {
        "percentile_method": PERCENTILE_METHOD,
        "time_zero": "the request's arrival (as in simulate)",
        "num_requests": len(records),
        "num_finished": len(done),
        "wall_s": wall_s,
        "num_preemptions": sum(s.preemptions for s in done),
        "input_tokens_per_s": sum(s.req.prompt_tokens for s in done) / wall_s,
        "output_tokens_per_s": sum(s.generated for s in done) / wall_s,
        **latency(done, itl_pairs(done)),
        "requests": [_request_dict(s) for s in done],
    }


def _request_dict(seq: Seq) -> dict:
    start = seq.req.arrival_s
    gaps = [b - a for a, b in zip(seq.prefill_token_s, seq.prefill_token_s[1:], strict=False)]
    return {"request_id": seq.req.request_id, "prompt_tokens": seq.req.prompt_tokens,
            "output_tokens": seq.generated, "arrival_s": start,
            "queue_ms": (seq.admitted_s - start) * 1e3,
            "ttft_ms": (seq.first_token_s - start) * 1e3,
            "itl_ms_mean": sum(gaps) / len(gaps) * 1e3 if gaps else None,
            "e2e_ms": (seq.release_s - start) * 1e3, "preemptions": seq.preemptions}


def step_ms(values: list[float]) -> dict:
    """{p50, p95} of step durations in ms, nearest rank as everywhere else."""
    stats = quantiles(values)
    return {p: None if stats[p] is None else stats[p] * 1e3 for p in ("p50", "p95")}
