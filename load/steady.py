"""Steady state of a measured run by the simulator's own rules: sim/steady.py finds the
warm-up (MSER-5) and cuts the drain, and sim/measure.py reports the window with its 95 %
batch-means intervals, over the requests the server answered.

A measured request has every token's arrival time, not a decode timeline: its gaps are given
to the simulator's ITL count as `extra_gaps_s` (each counted once). The KV series MSER-5
reads is the server's blocks in use from /metrics when it was scraped, else none (the
requests-in-system series alone then decides the warm-up). Queue time is not observable
from the stream: the window's queue figures are left empty.
"""

from dataclasses import dataclass, field

from servecap.sim.measure import Run, measure
from servecap.sim.metrics import SLO
from servecap.sim.state import DONE, Seq

POLICY = "measured"
EMPTY_QUEUE = {"queue_ms": None, "queue_ms_ci": None}


@dataclass
class _Server:
    """What sim.measure reads of an engine's result: the requests, a decode timeline (none:
    each request's gaps are its own) and KV samples (time, -, blocks in use)."""

    seqs: list[Seq]
    decode_end_s: list[float] = field(default_factory=list)
    kv_samples: list[tuple[float, int, int]] = field(default_factory=list)


def steady_window(seqs: list[Seq], kv_samples: list[tuple[float, int, int]] = (),
                  slo: SLO | None = None) -> dict:
    """sim.measure's summary of the run's measured window: steady_state (and why not),
    warm-up and drain counts, rates and latency percentiles with *_ci intervals."""
    ordered = [_copy(s) for s in sorted(seqs, key=lambda s: (s.req.arrival_s,
                                                              s.req.request_id))]
    server = _Server(ordered, kv_samples=list(kv_samples))
    report = measure(POLICY, [Run(ordered, [server])], slo or SLO())
    return {k: v for k, v in report.items() if k not in ("policy", "simulated_requests",
                                                         "num_runs")} | EMPTY_QUEUE


def _copy(seq: Seq) -> Seq:
    """The request as sim.measure reads it: admitted at its arrival (queue unseen), its
    token gaps as extra gaps."""
    out = Seq(seq.req)
    out.state, out.reason, out.release_s = seq.state, seq.reason, seq.release_s
    out.generated = seq.generated
    if seq.state == DONE:
        times = seq.prefill_token_s
        out.admitted_s = seq.req.arrival_s
        out.prefill_token_s, out.last_token_s = list(times), times[-1]
        out.extra_gaps_s = [b - a for a, b in zip(times, times[1:], strict=False)]
    return out


def kv_samples(scraper, start_s: float) -> list[tuple[float, int, int]]:
    """The server's KV blocks in use at each /metrics sample, in run seconds."""
    if scraper is None:
        return []
    out = []
    for sample in scraper.samples:
        usage, blocks = sample.get("kv_usage"), sample.get("num_gpu_blocks")
        if usage is not None and blocks is not None:
            out.append((sample["time"] - start_s, 0, round(usage * blocks)))
    return out
