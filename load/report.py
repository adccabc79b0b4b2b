"""Measured requests in the simulator's terms: its Seq records, CSV rows and percentiles.

Each answered request becomes a sim Seq (state completed) whose token times are the stream's
chunk arrivals, so `records` and `token_rows` write the same CSV schemas as `simulate` and
the percentiles use the same nearest-rank method. Failed requests are rows with state
`rejected` and the error as their reason: counted, never dropped. Queue time (acceptance to
admission) is inside the server and not observable from the stream: its columns stay empty.
"""

from collections import Counter
from dataclasses import replace

from servecap.sim.metrics import PERCENTILE_METHOD, ms, quantiles, tpot_s, weighted_quantiles
from servecap.sim.records import RECORD_COLUMNS, TOKEN_COLUMNS, records, token_rows
from servecap.sim.state import DONE, REJECTED, Seq

from .errors import OK
from .runner import Sent

POLICY = "measured"
__all__ = ["RECORD_COLUMNS", "TOKEN_COLUMNS", "measured_seqs", "record_rows", "summarize",
           "token_time_rows"]


def measured_seqs(sent: list[Sent], start_s: float) -> list[Seq]:
    return [_seq(s, start_s) for s in sorted(sent, key=lambda s: s.request.request_id)]


def _seq(sent: Sent, start_s: float) -> Seq:
    out = sent.outcome
    ok = out.status == OK and bool(out.token_s)
    req = replace(sent.request, arrival_s=sent.arrival_s,
                  output_tokens=out.num_output_tokens if ok else sent.request.output_tokens)
    seq = Seq(req)
    if ok:
        seq.state = DONE
        seq.prefill_token_s = [t - start_s for t in out.token_s]
        seq.last_token_s = seq.prefill_token_s[-1]
    else:
        seq.state = REJECTED
        seq.reason = f"{out.status}: {out.detail}" if out.status != OK else \
            "stream_error: no token in the stream"
    seq.release_s = None if out.done_s is None else out.done_s - start_s
    seq.generated = len(out.token_s)
    return seq


def record_rows(seqs: list[Seq], deployment: str) -> list[dict]:
    return records(POLICY, deployment, seqs)


def token_time_rows(seqs: list[Seq], deployment: str) -> list[dict]:
    return token_rows(POLICY, deployment, [], seqs)


def summarize(sent: list[Sent], seqs: list[Seq], start_s: float) -> dict:
    """Counts (every request accounted for), throughput and latency percentiles in ms."""
    done = [s for s in seqs if s.state == DONE]
    statuses = Counter(s.outcome.status if s.outcome.status != OK or s.outcome.token_s
                       else "stream_error" for s in sent)
    http = Counter(str(s.outcome.http_status) for s in sent if s.outcome.http_status)
    end = max((s.release_s for s in done), default=0.0)
    span = max(end - min((s.req.arrival_s for s in seqs), default=0.0), 1e-12)
    wanted = {s.request.request_id: s.request.output_tokens for s in sent}
    return {
        "offered": len(sent), "completed": len(done), "failed": len(seqs) - len(done),
        "errors": {k: v for k, v in sorted(statuses.items()) if k != OK},
        "error_examples": sorted({s.reason for s in seqs if s.state == REJECTED})[:3],
        "http_status_counts": dict(sorted(http.items())),
        "output_token_mismatches": sum(1 for s in done
                                       if s.req.output_tokens != wanted[s.req.request_id]),
        "duration_s": round(span, 6), "achieved_rps": len(done) / span,
        "input_tokens_per_s": sum(s.req.prompt_tokens for s in done) / span,
        "output_tokens_per_s": sum(s.req.output_tokens for s in done) / span,
        "max_send_lag_ms": round(max((s.outcome.sent_s - start_s - s.arrival_s
                                      for s in sent), default=0.0) * 1000, 3),
        **prompt_check(sent), **latency(done), "percentile_method": PERCENTILE_METHOD,
        "turns": per_turn(sent, seqs),
    }


def prompt_check(sent: list[Sent]) -> dict:
    """The client's prompt token counts against the server's usage.prompt_tokens, for every
    answered request that has both; mismatches are counted and shown, never hidden."""
    pairs = [(s.request.request_id, s.counted_prompt_tokens, s.outcome.num_prompt_tokens)
             for s in sent if s.outcome.status == OK]
    both = [(i, c, u) for i, c, u in pairs if c is not None and u is not None]
    wrong = [(i, c, u) for i, c, u in both if c != u]
    return {"prompt_tokens_checked": len(both), "prompt_token_mismatches": len(wrong),
            "prompt_token_mismatch_examples": [f"request {i}: counted {c}, server {u}"
                                               for i, c, u in wrong[:3]]}


def per_turn(sent: list[Sent], seqs: list[Seq]) -> list[dict]:
    """Per turn of the conversations: requests, completed, mean prompt tokens, and the
    prefix cache's share from usage.prompt_tokens_details.cached_tokens (None: the server
    did not send it), with TTFT p50."""
    by_id = {s.req.request_id: s for s in seqs}
    out = []
    for turn in sorted({s.turn for s in sent}):
        these = [s for s in sent if s.turn == turn]
        done = [by_id[s.request.request_id] for s in these
                if by_id[s.request.request_id].state == DONE]
        cached = [s.outcome.num_cached_tokens for s in these
                  if s.outcome.status == OK and s.outcome.num_cached_tokens is not None]
        prompts = sum(s.request.prompt_tokens for s in these if s.outcome.status == OK)
        out.append({
            "turn": turn + 1, "requests": len(these), "completed": len(done),
            "mean_prompt_tokens": prompts / max(len(done), 1),
            "cached_prompt_tokens": sum(cached) if cached else None,
            "mean_cached_prompt_tokens": sum(cached) / len(cached) if cached else None,
            "cached_share": sum(cached) / prompts if cached and prompts else None,
            "ttft_ms_p50": ms(quantiles([s.first_token_s - s.req.arrival_s
                                         for s in done]))["p50"]})
    return out


def latency(done: list[Seq]) -> dict:
    """simulate's definitions, from the arrival: TTFT to the first token, ITL every gap
    between a request's tokens, TPOT (last - first) / (n - 1), E2E to the stream's end."""
    gaps = [(b - a, 1) for s in done for a, b in zip(s.prefill_token_s, s.prefill_token_s[1:],
                                                     strict=False)]
    return {
        "queue_ms": ms(quantiles([])),
        "ttft_ms": ms(quantiles([s.first_token_s - s.req.arrival_s for s in done])),
        "itl_ms": ms(weighted_quantiles(gaps)),
        "tpot_ms": ms(quantiles([tpot_s(s) for s in done if s.req.output_tokens > 1])),
        "e2e_ms": ms(quantiles([s.release_s - s.req.arrival_s for s in done])),
    }
