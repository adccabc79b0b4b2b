"""The simulator's byte-identity cases: every policy and every engine feature (preemption by
recompute and swap, prefix caching, priority, closed loop, multi-step, replicas, disaggregated
pools, step-time jitter over seeds, collectives, MoE, pipeline stages, hybrid state,
speculation, max_model_len refusals) on explicit coefficients, so a change to the latency
model's fitted tables does not move them. Each case's digest covers every request's raw
state (repr of every float), the decode timelines, the KV samples, the records and token
CSVs and the report, so a change of one bit anywhere changes it.

    python tests/sim/golden/cases.py        # print the digests (regenerate the fixture only
                                            # from a commit whose simulator is known good)
"""

import csv
import hashlib
import io
import json
from dataclasses import replace

from servecap.sim.config import POLICIES, SchedulerConfig
from servecap.sim.deploy import Deployment, run_deployment
from servecap.sim.metrics import SLO
from servecap.sim.records import (
    RECORD_COLUMNS,
    TOKEN_COLUMNS,
    kv_occupancy,
    records,
    tail,
    token_rows,
)
from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import draw_requests
from servecap.sim.speculative import Speculation
from servecap.sim.workload import workload_from_dict

BASE = Coefficients(weights_bytes=14_000_000_000, kv_bytes_per_token=131_072,
                    flops_per_token=14_000_000_000, bandwidth_bytes_per_s=2e12,
                    flops_per_s=990e12, step_overhead_s=0.001,
                    attention_flops_per_token_pair=262_144, num_layers=32,
                    gemm_efficiency=0.8, attention_efficiency=0.6, bandwidth_efficiency=0.85)
FULL = replace(BASE, tensor_parallel_size=4, collective_bytes_per_token=57_344.0,
               collective_latency_s=2e-5, cpu_step_s=0.0015, cpu_per_seq_s=2e-5,
               eager_layer_s=4e-5, graph_max_tokens=256, graph_prefill=0.0,
               frontend_s=0.0004, frontend_latency_s=0.002)
MOE = replace(BASE, moe_expert_bytes=10_000_000_000, moe_flops_per_token=9_000_000_000,
              moe_gemm_efficiency=0.45, num_moe_layers=24, num_experts=64,
              experts_per_token=4, moe_layer_overhead_s=1e-5)
PIPE = replace(BASE, pipeline_parallel_size=2, pipeline_bytes_per_token=8192.0,
               pipeline_latency_s=1e-5)
HYBRID = replace(BASE, state_bytes_per_request=50_000_000)
ASYNC = replace(FULL, cpu_overlap=1.0)
JITTER = replace(BASE, step_time_cv=0.3)
SLOS = SLO(ttft_s=0.5, itl_s=0.05, percentiles=(90.0, 99.9))


def workload(n: int = 300, rate: float = 12.0, **extra) -> list:
    doc = {"seed": 11, "num_requests": n, "arrivals": {"kind": "poisson", "rate_per_s": rate},
           "prompt_tokens": {"kind": "lognormal", "median": 500, "sigma": 0.9, "max": 6000},
           "output_tokens": {"kind": "uniform", "low": 1, "high": 400},
           "prefix_groups": [{"name": "sys", "tokens": 600, "share": 0.5},
                             {"name": "tools", "tokens": 250, "share": 0.2}]} | extra
    return draw_requests(workload_from_dict(doc))


def cases() -> dict:
    """name -> (requests, coefficients, config, num_blocks, deployment, num_seeds)."""
    reqs = workload()
    tight = 2_500  # blocks of 16 tokens: queueing and preemption at this rate
    out = {}
    for policy in POLICIES:
        out[policy] = (reqs, BASE, SchedulerConfig(policy=policy), tight, Deployment(), 1)
        out[f"{policy}-full"] = (reqs, FULL, SchedulerConfig(policy=policy), tight,
                                 Deployment(), 1)
    tenants = workload(tenants=[{"name": "gold", "share": 0.3, "priority": 0},
                                {"name": "free", "share": 0.7, "priority": 5}])
    spec = Speculation(draft_length=4, acceptance=0.7, draft=replace(
        BASE, weights_bytes=1_000_000_000, flops_per_token=1_000_000_000), max_batch=24)
    for policy in ("continuous", "chunked-prefill"):
        cfg = SchedulerConfig(policy=policy)
        out[f"{policy}-swap"] = (reqs, BASE, replace(cfg, preemption_mode="swap"), 1_200,
                                 Deployment(), 1)
        out[f"{policy}-priority"] = (tenants, BASE, replace(cfg, scheduling="priority"),
                                     tight, Deployment(), 1)
        out[f"{policy}-moe"] = (reqs, MOE, cfg, tight, Deployment(), 1)
        out[f"{policy}-pipeline"] = (reqs, PIPE, cfg, tight, Deployment(), 1)
        out[f"{policy}-hybrid"] = (reqs, HYBRID, replace(cfg, state_blocks=24), tight,
                                   Deployment(), 1)
        out[f"{policy}-async"] = (reqs, ASYNC, cfg, tight, Deployment(), 1)
        out[f"{policy}-jitter"] = (reqs, JITTER, replace(cfg, seed=3), tight, Deployment(), 3)
        out[f"{policy}-spec"] = (reqs, BASE, replace(cfg, speculation=spec), tight,
                                 Deployment(), 1)
        out[f"{policy}-nocache"] = (reqs, BASE, replace(cfg, prefix_caching=False,
                                                        max_model_len=2048), tight,
                                    Deployment(), 1)
    for policy in ("continuous", "decode-priority", "static"):
        out[f"{policy}-closed"] = (reqs, FULL, SchedulerConfig(policy=policy, concurrency=12),
                                   tight, Deployment(), 1)
    out["continuous-multistep"] = (reqs, BASE, SchedulerConfig(num_scheduler_steps=4), tight,
                                   Deployment(), 1)
    out["decode-priority-multistep"] = (reqs, FULL, SchedulerConfig(
        policy="decode-priority", num_scheduler_steps=8), tight, Deployment(), 1)
    fast = workload(n=400, rate=30.0)
    for router in ("round-robin", "least-requests", "least-tokens"):
        out[f"replicas-{router}"] = (fast, FULL, SchedulerConfig(policy="chunked-prefill"),
                                     tight, Deployment(replicas=3, router=router), 1)
    out["disaggregated"] = (fast, BASE, SchedulerConfig(policy="chunked-prefill"), tight,
                            Deployment(prefill_replicas=1, decode_replicas=2), 1)
    out["disaggregated-continuous-jitter"] = (fast, JITTER, SchedulerConfig(), tight,
                                              Deployment(prefill_replicas=2,
                                                         decode_replicas=1), 2)
    long = workload(n=2_500, rate=9.0)
    for policy in ("continuous", "chunked-prefill"):
        out[f"{policy}-steady"] = (long, BASE, SchedulerConfig(policy=policy), 20_000,
                                   Deployment(), 1)
    return out


def digest(case: tuple, tokens: bool = False) -> str:
    """sha256 over everything the case's run produced (see the module docstring); the
    per-token CSV only with `tokens` (it is rebuilt from the timelines hashed anyway)."""
    reqs, coef, config, blocks, deployment, seeds = case
    h = hashlib.sha256()
    for outcome in run_deployment(reqs, coef, config, blocks, deployment, SLOS, seeds):
        for res in outcome.results:
            h.update(repr((res.end_s, res.num_iterations, res.busy_s, res.queue_area,
                           res.system_area, res.peak_used_blocks, res.num_arrived,
                           res.unheld_blocks)).encode())
            h.update(repr(list(res.decode_end_s)).encode())
            h.update(repr([tuple(s) for s in res.kv_samples]).encode())
            h.update(json.dumps(kv_occupancy(res), sort_keys=True).encode())
        for seq in outcome.seqs:
            h.update(repr(_raw(seq)).encode())
        h.update(json.dumps(outcome.summary, sort_keys=True).encode())
        h.update(json.dumps(tail(outcome.seqs), sort_keys=True).encode())
        h.update(_csv(RECORD_COLUMNS, records(config.policy, outcome.deployment,
                                              outcome.seqs)))
        if tokens:
            h.update(_csv(TOKEN_COLUMNS, token_rows(config.policy, outcome.deployment,
                                                    outcome.results, outcome.seqs)))
    return h.hexdigest()


def _raw(seq) -> tuple:
    return (seq.req, seq.state, seq.reason, seq.generated, seq.admitted_s,
            seq.prefill_start_s, seq.prefill_end_s, seq.release_s, list(seq.prefill_token_s),
            [tuple(s) for s in seq.segments], seq.preemptions, seq.recomputed_tokens,
            seq.chunks, seq.prefix_hit_tokens, seq.last_token_s, list(seq.extra_gaps_s),
            seq.ready_s)


def _csv(columns: tuple, rows: list) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


if __name__ == "__main__":
    print(json.dumps({name: digest(case, name in POLICIES) for name, case in cases().items()},
                     indent=1))
