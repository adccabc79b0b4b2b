"""Replicas behind a router, and disaggregated prefill and decode pools (DistServe-style)."""

from dataclasses import replace

from servecap.ledger.errors import SpecError

from .config import SchedulerConfig
from .core import Engine
from .engine import reject
from .metrics import SLO, itl_pairs, summarize_seqs
from .roofline import Coefficients
from .run import advance, finish_run
from .sampling import Request
from .state import DONE, Seq, SimResult

ROUTERS = ("round-robin", "least-requests", "least-tokens")


def outstanding_tokens(eng: Engine) -> int:
    """Prompt tokens still to compute plus output tokens still to generate, over every
    request the replica holds (a router's least-outstanding-tokens signal). A decoding
    sequence has made dec_idx - j0 tokens since it joined the decode set. The engine keeps
    the sums as its requests change (Engine.owed, Engine.j0_sum): evaluated for every replica
    at every arrival, the sums over held requests were a fifth of a search's CPU."""
    return eng.owed - (len(eng.decoding) * eng.dec_idx - eng.j0_sum)


def held_requests(eng: Engine) -> int:
    """Requests routed to the replica and not yet released (a request-count router)."""
    return len(eng.seqs) - eng.next_arrival + len(eng.waiting) + len(eng.running)


def _pick(router: str, engines: list[Engine], index: int) -> Engine:
    if router == "round-robin":
        return engines[index % len(engines)]
    if router == "least-requests":
        return min(engines, key=held_requests)
    return min(engines, key=outstanding_tokens)


def route(seqs: list[Seq], coef: Coefficients, config: SchedulerConfig, num_blocks: int,
          num_replicas: int, router: str) -> list[SimResult]:
    """Each request goes to a replica when it becomes ready; the router sees every replica as
    of its latest iteration boundary. Replicas are identical and independent."""
    if router not in ROUTERS:
        raise SpecError("--router", router, "one of " + ", ".join(ROUTERS))
    if num_replicas < 1:
        raise SpecError("--replicas", num_replicas, "a whole number >= 1")
    engines = [Engine([], coef, config, num_blocks) for _ in range(num_replicas)]
    horizon = config.max_time_s
    for index, seq in enumerate(sorted(seqs, key=lambda s: s.ready_s)):
        until = seq.ready_s if horizon is None else min(seq.ready_s, horizon)
        for eng in engines:
            if eng.now < until:  # a replica already past `until` would run nothing
                advance(eng, until)
        _pick(router, engines, index).add(seq)
    for eng in engines:
        advance(eng, horizon)
    return [finish_run(eng) for eng in engines]


def simulate_replicas(requests: list[Request], coef: Coefficients, config: SchedulerConfig,
                      num_blocks: int, num_replicas: int, router: str) -> list[SimResult]:
    return route([Seq(r) for r in requests], coef, config, num_blocks, num_replicas, router)


def simulate_disaggregated(requests: list[Request], coef: Coefficients,
                           config: SchedulerConfig, num_blocks: int, num_prefill: int,
                           num_decode: int, transfer_bytes_per_s: float,
                           router: str) -> tuple[list[SimResult], list[Seq], list[SimResult]]:
    """Prefill replicas compute each prompt and its first token; the KV cache then crosses
    the link (prompt tokens x kv_bytes_per_token / transfer_bytes_per_s) to a decode replica,
    which streams the rest. Returns the prefill results, every request's final state, and
    the decode results."""
    if not transfer_bytes_per_s > 0:
        raise SpecError("--kv-transfer", transfer_bytes_per_s, "a bandwidth > 0")
    if config.policy == "static":
        raise SpecError("policy", "static", "a decode pool needs iteration-level batching: "
                        "continuous, prefill-priority, decode-priority or chunked-prefill")
    refused = {}  # too long for max_model_len as offered: the API refuses it before prefill
    for req in requests:
        reason = config.too_long(req.prompt_tokens, req.output_tokens)
        if reason:
            refused[req.request_id] = seq = Seq(req)
            reject(seq, reason)
    first = [replace(r, output_tokens=1) for r in requests if r.request_id not in refused]
    prefill = simulate_replicas(first, coef, replace(config, policy="continuous"), num_blocks,
                                num_prefill, router)
    by_id = {s.req.request_id: s for res in prefill for s in res.seqs} | refused
    final, handoff = [], []
    for req in requests:
        done = by_id[req.request_id]
        if done.state != DONE or req.output_tokens == 1:
            done.req = req  # the final state carries the request as offered
            final.append(done)
            continue
        seq = _handoff(req, done, coef.kv_bytes_per_token * req.prompt_tokens
                       / transfer_bytes_per_s)
        handoff.append(seq)
        final.append(seq)
    decode = route(handoff, coef, config, num_blocks, num_decode, router)
    return prefill, final, decode


def _handoff(req: Request, done: Seq, transfer_s: float) -> Seq:
    """The decode replica's copy: first token made, prompt KV arriving after the transfer."""
    seq = Seq(req)
    seq.ready_s = done.first_token_s + transfer_s
    seq.admitted_s, seq.prefill_start_s = done.admitted_s, done.prefill_start_s
    seq.prefill_end_s, seq.chunks = done.prefill_end_s, done.chunks
    seq.prefill_token_s = list(done.prefill_token_s)
    seq.last_token_s, seq.generated = done.first_token_s, 1
    seq.swapped_tokens, seq.kv_transferred = req.prompt_tokens, True
    seq.preemptions, seq.recomputed_tokens = done.preemptions, done.recomputed_tokens
    seq.prefix_hit_tokens = done.prefix_hit_tokens
    return seq


def disaggregated_summary(final: list[Seq], decode: list[SimResult], policy: str,
                          slo: SLO) -> dict:
    """One report for the whole deployment: every request's final state; token gaps from the
    decode replicas (the first gap includes the KV transfer and the decode queue)."""
    report = summarize_seqs(policy, final, [p for r in decode for p in itl_pairs(r)], slo)
    report["not_arrived"] = 0
    report["num_iterations"] = sum(r.num_iterations for r in decode)
    return report
