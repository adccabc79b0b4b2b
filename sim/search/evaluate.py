"""Price one candidate: simulate it at the target rate; its SLO capacity by bisection on rate."""

from dataclasses import dataclass

from servecap.sim.cluster import simulate_disaggregated, simulate_replicas
from servecap.sim.config import SchedulerConfig
from servecap.sim.kvpool import pool_blocks
from servecap.sim.metrics import SLO, summarize_seqs
from servecap.sim.roofline import Coefficients
from servecap.sim.run import simulate
from servecap.sim.state import Seq
from servecap.sim.sweep import at_rate

from .memory import plan_layout
from .problem import Problem
from .space import Candidate, Layout
from .timemodel import parallel_coefficients

NUM_DOUBLINGS = 6  # capacity searched up to 2^6 x the target rate
NUM_BISECTIONS = 5  # then to within 1/32 of the bracket


@dataclass(frozen=True)
class Priced:
    """A layout ready to simulate: its time coefficients, KV pool and scheduler knobs."""

    coef: Coefficients
    num_blocks: int
    config: SchedulerConfig
    notes: tuple[str, ...]


def price_layout(problem: Problem, layout: Layout) -> Priced:
    verdict = plan_layout(problem, layout, problem.context_tokens)
    coef, notes = parallel_coefficients(problem.spec_for(layout.weight_dtype),
                                        verdict.deployment, layout.device,
                                        problem.step_overhead_s, layout.expert_parallel)
    config = SchedulerConfig(policy=problem.policy, max_num_seqs=layout.max_num_seqs,
                             max_num_batched_tokens=layout.max_num_batched_tokens,
                             block_size_tokens=problem.block_size_tokens)
    blocks = pool_blocks(verdict.deployment.plan, problem.block_size_tokens)
    return Priced(coef, blocks, config, notes)


def run_at(problem: Problem, priced: Priced, cand: Candidate, rate_per_s: float
           ) -> tuple[dict, list[Seq]]:
    """The deployment's summary and every request's final state at rate_per_s. The summary
    is the simulator's own, less the per-token ITL percentiles (a search reads TPOT; the
    token gaps were a quarter of its time)."""
    requests = at_rate(problem.workload, rate_per_s)
    if cand.disaggregated:
        _, seqs, _ = simulate_disaggregated(
            requests, priced.coef, priced.config, priced.num_blocks, cand.prefill,
            cand.decode, problem.kv_transfer_bytes_per_s, problem.router)
    else:
        if cand.replicas == 1:
            results = [simulate(requests, priced.coef, priced.config, priced.num_blocks)]
        else:
            results = simulate_replicas(requests, priced.coef, priced.config,
                                        priced.num_blocks, cand.replicas, problem.router)
        seqs = [s for r in results for s in r.seqs[:r.num_arrived]]
    return summarize_seqs(priced.config.policy, seqs, [], problem.slo), seqs


def meets(problem: Problem, summary: dict) -> bool:
    return summary["completed"] > 0 and summary["slo_attainment"] >= problem.target_attainment


def evaluate(problem: Problem, priced: Priced, cand: Candidate) -> dict:
    """One row of the ranked list: cost, throughput per GPU and per user, tails, SLO shares."""
    summary, seqs = run_at(problem, priced, cand, problem.rate_per_s)
    tpot_p50 = summary["tpot_ms"]["p50"]
    out_tps = summary["output_tokens_per_s"]
    return {
        "label": cand.label, "device": cand.layout.device,
        "tensor_parallel_size": cand.layout.tensor_parallel_size,
        "pipeline_parallel_size": cand.layout.pipeline_parallel_size,
        "expert_parallel": cand.layout.expert_parallel,
        "weight_dtype": cand.layout.weight_dtype, "kv_dtype": cand.layout.kv_dtype,
        "max_num_seqs": cand.layout.max_num_seqs,
        "max_num_batched_tokens": cand.layout.max_num_batched_tokens,
        "mode": "disaggregated" if cand.disaggregated else "aggregated",
        "replicas": cand.replicas, "prefill_replicas": cand.prefill,
        "decode_replicas": cand.decode, "num_gpus": cand.num_gpus,
        "num_kv_blocks_per_rank": priced.num_blocks,
        "output_tokens_per_s": out_tps, "tokens_per_s_per_gpu": out_tps / cand.num_gpus,
        "tokens_per_s_per_user": 1000 / tpot_p50 if tpot_p50 else None,
        "ttft_ms": _tails(summary["ttft_ms"]), "tpot_ms": _tails(summary["tpot_ms"]),
        "goodput_rps": summary["goodput_rps"], "slo_attainment": summary["slo_attainment"],
        "ttft_attainment": _share(seqs, SLO(ttft_s=problem.slo.ttft_s)),
        "tpot_attainment": _share(seqs, SLO(itl_s=problem.slo.itl_s)),
        "completed": summary["completed"], "rejected": summary["rejected"],
        "meets_slo": meets(problem, summary), "time_model_notes": list(priced.notes),
    }


def slo_capacity(problem: Problem, priced: Priced, cand: Candidate) -> float:
    """The highest offered rate (req/s) still meeting the SLO target: doubling from the target
    rate until it fails, then bisection. The target rate must already meet it."""
    low, high = problem.rate_per_s, None
    for _ in range(NUM_DOUBLINGS):
        if not meets(problem, run_at(problem, priced, cand, 2 * low)[0]):
            high = 2 * low
            break
        low *= 2
    if high is None:
        return low
    for _ in range(NUM_BISECTIONS):
        mid = (low + high) / 2
        if meets(problem, run_at(problem, priced, cand, mid)[0]):
            low = mid
        else:
            high = mid
    return low


def candidate_of(row: dict) -> Candidate:
    """The candidate a result row describes."""
    layout = Layout(row["device"], row["tensor_parallel_size"], row["pipeline_parallel_size"],
                    row["weight_dtype"], row["kv_dtype"], row["max_num_seqs"],
                    row["max_num_batched_tokens"], row.get("expert_parallel", False))
    return Candidate(layout, row["replicas"], row["prefill_replicas"], row["decode_replicas"])


def row_capacity(problem: Problem, row: dict) -> float:
    """The SLO capacity (req/s) of a row that meets the SLOs at the target rate."""
    cand = candidate_of(row)
    return slo_capacity(problem, price_layout(problem, cand.layout), cand)


def _tails(stats: dict) -> dict:
    return {"p50": stats["p50"], "p99": stats["p99"]}


def _share(seqs: list[Seq], slo: SLO) -> float:
    return sum(1 for s in seqs if slo.met(s)) / len(seqs) if seqs else 0.0
