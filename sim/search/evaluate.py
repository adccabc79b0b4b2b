"""Price one candidate: simulate it at the target rate until steady; its SLO capacity by
sim/capacity.py's bisection."""

from dataclasses import dataclass, replace

from servecap.sim.capacity import capacity, may_meet, verdict
from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment, run_once
from servecap.sim.measure import measure
from servecap.sim.roofline import Coefficients
from servecap.sim.sampling import at_rate, draw_requests
from servecap.sim.sizing import RunSize, run_size, settled, steady_point

from .memory import plan_layout
from .problem import Problem
from .space import Candidate, Layout
from .timemodel import parallel_coefficients

LENGTH_SAMPLE = 500  # requests drawn to price a layout's unloaded request lifetime


@dataclass(frozen=True)
class Priced:
    """A layout ready to simulate: its time coefficients, KV pool, scheduler knobs and how
    long its runs need to be."""

    coef: Coefficients
    num_blocks: int
    config: SchedulerConfig
    notes: tuple[str, ...]
    size: RunSize


def price_layout(problem: Problem, layout: Layout) -> Priced:
    verdict = plan_layout(problem, layout, problem.context_tokens)
    coef, notes = parallel_coefficients(problem.spec_for(layout.weight_dtype),
                                        verdict.deployment, layout.device,
                                        problem.step_overhead_s, layout.expert_parallel,
                                        problem.engine)
    budget = verdict.deployment.plan.budget  # plan --engine vllm's pool, in its own pages
    blocks, state = simulated_pages(budget, problem.context_tokens)
    config = SchedulerConfig(policy=problem.policy, max_num_seqs=layout.max_num_seqs,
                             max_num_batched_tokens=layout.max_num_batched_tokens,
                             block_size_tokens=budget.block_size_tokens, state_blocks=state)
    sample = draw_requests(replace(problem.workload, num_requests=min(
        problem.workload.num_requests, LENGTH_SAMPLE)))
    size = run_size(coef, sample, problem.workload.num_requests, from_floor=True)
    return Priced(coef, blocks, config, notes, size)


def simulated_pages(budget, context_tokens: int) -> tuple[int, int]:
    """(blocks, state blocks per request) of vLLM's pool for the simulator. A hybrid's pages
    hold budget.block_size_tokens attention tokens (vLLM raises the block size to the state's
    page); each of its k attention groups takes a page per block of tokens, so a simulated
    block is k pages, and its state groups hold the rest of blocks_per_request whatever the
    length. Without state groups: the pool as one group (a sliding-window group's pages
    are not charged, as before)."""
    kinds = budget.kinds
    if "state" not in kinds:
        return budget.num_gpu_blocks, 0
    attention = len(kinds) - kinds.count("state")
    growing = attention * -(-context_tokens // budget.block_size_tokens)
    fixed = max(0, budget.blocks_per_request - growing)
    if not attention:
        return budget.num_gpu_blocks, fixed
    return budget.num_gpu_blocks // attention, -(-fixed // attention)


def deployment_of(problem: Problem, cand: Candidate) -> Deployment:
    return Deployment(max(cand.replicas, 1), problem.router, cand.prefill, cand.decode,
                      problem.kv_transfer_bytes_per_s)


def run_at(problem: Problem, priced: Priced, cand: Candidate, rate_per_s: float,
           decided: bool = True) -> dict:
    """The deployment's measured summary at rate_per_s, run until steady. When `decided`, a
    run that surely misses the target (its queue grew through the run, or its attainment's
    whole interval is below the target) stops early: a longer run would not rescue it. The
    simulator's own summary, less the per-token ITL percentiles (a search reads TPOT; the
    token gaps were a quarter of its time)."""
    target = problem.target_attainment

    def run(requests):
        outcome = run_once(requests, priced.coef, priced.config, priced.num_blocks,
                           deployment_of(problem, cand))
        return measure(priced.config.policy, [outcome], problem.slo, itl=False)

    def done(summary: dict) -> bool:
        return settled(summary) or (decided and not may_meet(summary, target))
    return steady_point(problem.workload, rate_per_s, run, priced.size, done)


def saturation_rps(problem: Problem, priced: Priced, cand: Candidate) -> float:
    """Requests/s with every request of a ceiling-sized run offered at once."""
    requests = [replace(r, arrival_s=0.0) for r in at_rate(problem.workload, 1.0)]
    run = run_once(requests, priced.coef, priced.config, priced.num_blocks,
                   deployment_of(problem, cand))
    return measure(priced.config.policy, [run], problem.slo, itl=False,
                   window=False)["achieved_rps"]


def evaluate(problem: Problem, priced: Priced, cand: Candidate) -> dict:
    """One row of the ranked list: cost, throughput per GPU and per user, tails, SLO shares,
    each figure people decide from with its interval, and the verdict (meets only when the
    attainment's interval clears the target)."""
    summary = run_at(problem, priced, cand, problem.rate_per_s)
    return describe(problem, priced, cand, summary)


def describe(problem: Problem, priced: Priced, cand: Candidate, summary: dict) -> dict:
    tpot_p50 = summary["tpot_ms"]["p50"]
    out_tps = summary["output_tokens_per_s"]
    out_ci = summary["output_tokens_per_s_ci"]
    judged = verdict(summary, problem.target_attainment)
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
        "tokens_per_s_per_gpu_ci": None if out_ci is None else
        [v / cand.num_gpus for v in out_ci],
        "tokens_per_s_per_user": 1000 / tpot_p50 if tpot_p50 else None,
        "ttft_ms": _tails(summary["ttft_ms"]), "tpot_ms": _tails(summary["tpot_ms"]),
        "ttft_ms_ci": summary["ttft_ms_ci"], "tpot_ms_ci": summary["tpot_ms_ci"],
        "goodput_rps": summary["goodput_rps"], "goodput_rps_ci": summary["goodput_rps_ci"],
        "slo_attainment": summary["slo_attainment"],
        "slo_attainment_ci": summary["slo_attainment_ci"],
        "ttft_attainment": summary["ttft_attainment"],
        "tpot_attainment": summary["tpot_attainment"],
        "completed": summary["completed"], "rejected": summary["rejected"],
        "steady_state": summary["steady_state"],
        "steady_state_reason": summary["steady_state_reason"],
        "overloaded": summary["overloaded"],
        "measured_requests": summary["measured_requests"],
        "simulated_requests": summary["simulated_requests"],
        "verdict": judged, "meets_slo": judged == "meets",
        "time_model_notes": list(priced.notes),
    }


def slo_capacity(problem: Problem, priced: Priced, cand: Candidate,
                 probes: dict[float, dict] | None = None) -> dict:
    """capacity.capacity of the candidate from the target rate, each probe run until steady,
    no rate at or above its saturation rate; `probes`: rates already run."""
    return capacity(lambda rate: run_at(problem, priced, cand, rate, decided=False),
                    problem.target_attainment, problem.rate_per_s,
                    saturation_rps(problem, priced, cand), probes=probes)


def candidate_of(row: dict) -> Candidate:
    """The candidate a result row describes."""
    layout = Layout(row["device"], row["tensor_parallel_size"], row["pipeline_parallel_size"],
                    row["weight_dtype"], row["kv_dtype"], row["max_num_seqs"],
                    row["max_num_batched_tokens"], row.get("expert_parallel", False))
    return Candidate(layout, row["replicas"], row["prefill_replicas"], row["decode_replicas"])


def row_capacity(problem: Problem, row: dict) -> dict:
    """The SLO capacity (capacity.capacity's keys) of a row that meets the SLOs at the target
    rate."""
    cand = candidate_of(row)
    return slo_capacity(problem, price_layout(problem, cand.layout), cand,
                        target_probe(problem.rate_per_s, row))


PROBE_KEYS = ("completed", "overloaded", "slo_attainment", "slo_attainment_ci",
              "steady_state", "measured_requests", "simulated_requests")


def target_probe(rate_per_s: float, row: dict) -> dict[float, dict] | None:
    """The row's own run at the target rate as a capacity probe, so it is not run again: a
    row that meets ran until steady exactly as a capacity probe does (the early stop on a
    sure miss never fired), so its summary is the probe's."""
    if not row["meets_slo"] or "overloaded" not in row:
        return None
    return {rate_per_s: {k: row[k] for k in PROBE_KEYS}}


def _tails(stats: dict) -> dict:
    return {"p50": stats["p50"], "p99": stats["p99"]}
