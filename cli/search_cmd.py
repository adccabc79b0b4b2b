"""`servecap search`: the cheapest deployment meeting the SLOs, its frontier, launch lines."""

import functools
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from servecap.ledger import dtypes
from servecap.ledger.errors import SpecError
from servecap.ledger.vllm_versions import VllmRow
from servecap.scenario.deployment import load
from servecap.scenario.simulation import check_policy
from servecap.scenario.spec import DEFAULT, Scenario, Search, with_values
from servecap.scenario.steps import engine_label, simulated_row
from servecap.scenario.values import slo_target
from servecap.sim.cluster import ROUTERS
from servecap.sim.metrics import SLO
from servecap.sim.search.fleet import read_rate_trace
from servecap.sim.search.prices import parse_prices, price_table
from servecap.sim.search.problem import Problem
from servecap.sim.search.search import run_search
from servecap.sim.search.space import Axes, parse_counts, parse_devices, parse_dtypes, parse_ratios
from servecap.sim.shape import with_load
from servecap.sim.sweep import at_rate

from . import sim_options as o
from .errors import EXIT_DOES_NOT_FIT, EXIT_INTERRUPTED, fail, handle_errors
from .fleet_view import answer_fleet
from .inputs import PlanFlags, serve_spec
from .option_groups import options_from
from .scenario_opts import SaveScenario, ScenarioFile, merged, save
from .search_view import infeasible_line, render_search
from .sim_inputs import load_workload, parse_bandwidth, parse_duration
from .sim_xlsx import check_target
from .workbook_scenario import Recording

Opt = typer.Option
Ask = functools.partial(Opt, rich_help_panel="The question (workload, rate, SLOs, prices)")
Look = functools.partial(Opt, rich_help_panel="The space searched (each a list)")
D = DEFAULT


@dataclass(frozen=True)
class SearchQuestion:
    """What search answers: the workload at a rate, the SLOs and their share, the context, the
    policy simulated and the fleet's terms, the prices."""

    workload: Annotated[Path | None, Ask(help="Workload YAML: lengths, prefix groups, "
                                         "seed (its arrival rate is replaced by "
                                         "--rate). Required unless --scenario gives "
                                         "it.")] = None
    rate: Annotated[float | None, Ask("--rate", "--request-rate",
                                      help="Target offered load, requests per second "
                                      "(required unless --scenario gives it).")] = None
    slo_ttft: Annotated[str | None, Ask("--slo-ttft", help="TTFT target, e.g. 500ms.")] = None
    slo_tpot: Annotated[str | None, Ask("--slo-tpot", "--slo-itl", help="TPOT target "
                                        "(mean gap between a request's tokens), e.g. "
                                        "50ms; --slo-itl is the same flag.")] = None
    target: Annotated[float, Ask(help="Share of requests that must meet every SLO.")] = (
        D.slo.target)
    max_model_len: Annotated[int | None, Ask("--max-model-len", "--context",
                                             help="Context every layout must hold "
                                             "(default: the workload's longest "
                                             "request).")] = None
    num_requests: Annotated[int | None, Ask(help="Most requests one run of a candidate "
                                            "may simulate (default: the workload's "
                                            "count): each runs from 200 until steady, "
                                            "sized by request lifetimes.")] = None
    policy: Annotated[str, Ask(help="Scheduler policy simulated.")] = D.search.policy
    step_overhead: o.StepOverhead = D.simulator.step_overhead
    kv_transfer: o.KvTransfer = D.simulator.kv_transfer
    router: o.Router = D.simulator.router
    gpu_price: Annotated[list[str] | None, Ask(help="DEVICE=USD per GPU-hour "
                                               "(repeatable); default: servecap's "
                                               "labelled price table.")] = None
    expert_parallel: Annotated[bool, Ask("--enable-expert-parallel", help="MoE: also try "
                                         "every tp >= 2 layout with the tp ranks "
                                         "holding whole experts (vLLM's flag; each MoE "
                                         "layer's all-reduce becomes an all-to-all).")] = False
    engine: Annotated[str | None, Ask("--engine", help="vLLM release assumed, e.g. "
                                      "vllm==0.6.3: its host, CUDA-graph and API-server "
                                      "costs price each step (as simulate --engine), its "
                                      "memory rules plan each layout, its launch line is "
                                      "printed. plain: the device's roofline and efficiency "
                                      "tables alone. Default: vllm, the newest release "
                                      "known.", show_default=False)] = None


@dataclass(frozen=True)
class SearchSpace:
    """Where search looks: devices, parallel sizes, replicas, dtypes and the engine's batch
    limits (each a comma-separated list), split pools, and how it narrows the search."""

    devices: Annotated[str | None, Look(help="Catalog devices to try, e.g. h100-80gb,"
                                       "h200 (a unique prefix names one; required "
                                       "unless --scenario gives them).")] = None
    max_gpus: Annotated[int, Look(help="Most GPUs one deployment may use.")] = D.search.max_gpus
    tp: Annotated[str, Look("--tp", "-tp",
                           help="Tensor-parallel sizes, e.g. 1,2,4,8.")] = (
        D.search.tensor_parallel_sizes)
    pp: Annotated[str, Look("--pp", "-pp",
                           help="Pipeline-parallel sizes, e.g. 1,2.")] = (
        D.search.pipeline_parallel_sizes)
    replicas: Annotated[str | None, Look(help="Replica counts (default: 1 up to what "
                                        "--max-gpus allows).")] = None
    weight_dtype: Annotated[str | None, Look(help="Weight dtypes, e.g. bf16,fp8 "
                                            "(default: the checkpoint's).")] = None
    kv_dtype: Annotated[str | None, Look("--kv-dtype", "--kv-cache-dtype",
                                         help="KV cache dtypes, e.g. bf16,fp8 "
                                         "(default: the checkpoint's).")] = None
    max_num_seqs: Annotated[str, Look(help="max_num_seqs values.")] = D.search.max_num_seqs
    max_num_batched_tokens: Annotated[str, Look(help="max_num_batched_tokens values.")] = (
        D.search.max_num_batched_tokens)
    disaggregate: Annotated[str, Look(help="Prefill:decode replica ratios to try "
                                     "(scaled while they fit), or none.")] = D.search.disaggregate
    prune: Annotated[bool, Look("--prune/--no-prune", help="Skip candidates decided by "
                               "monotonicity in GPU count.")] = D.search.prune
    capacity: Annotated[bool, Look("--capacity/--no-capacity", help="Bisect each "
                                  "qualifying candidate's SLO capacity (req/s).")] = (
        D.search.capacity)


@options_from(SearchQuestion, "question", after="model")
@options_from(SearchSpace, "space", after="model")
def search(ctx: typer.Context, model: o.OptionalModel = None,
           workers: Annotated[int | None, Opt(help="Local worker processes (default: every "
                                              "core).")] = None,
           ray: Annotated[str | None, Opt(help="Run on Ray: auto, ray://HOST:PORT, or local "
                                          "(a private Ray with --workers CPUs).")] = None,
           top: Annotated[int, Opt(help="Rows of the ranked list shown.")] = 10,
           rate_trace: Annotated[Path | None, Opt(
               "--rate-trace", help="CSV of hour,rate_per_s (a day: hours 0-23): the "
               "cheapest fleet for each hour and the scale-up thresholds on vLLM's "
               "metrics, instead of one rate's answer (docs/search.md).")] = None,
           as_json: o.Json = False, xlsx: o.Xlsx = None, force: o.XlsxForce = False,
           verbose: o.Verbose = False, scenario_file: ScenarioFile = None,
           save_scenario: SaveScenario = None, question: SearchQuestion = None,
           space: SearchSpace = None) -> None:
    """Search deployments for the cheapest that meets the SLOs at --rate.

    The space is device x TP x PP x replicas x dtypes x max_num_seqs x max_num_batched_tokens,
    aggregated and disaggregated. Layouts the per-rank ledger cannot fit are pruned; the rest
    are simulated at --rate until steady, ranked by cost per hour, and the Pareto frontier of
    tokens/s per GPU against tokens/s per user is drawn; the answers are re-checked with their
    SLO capacity and its 95 % interval, and ties are called. Exit 1 when nothing qualifies.

    Example:

      servecap search llama-3.1-70b-instruct --workload workloads/chat.yaml --rate 4 \\
          --slo-ttft 1s --slo-tpot 50ms --devices h100-80gb,h200 --max-gpus 16
    """
    q, sp = question, space
    trace = read_rate_trace(rate_trace) if rate_trace is not None else None
    if trace is not None and q.rate is not None:
        raise SpecError("--rate", q.rate, "the rates come from --rate-trace; drop --rate")
    built = search_scenario(model, q.workload, q.rate if trace is None else
                            max(r for _, r in trace), q.slo_ttft, q.slo_tpot, q.target,
                            q.max_model_len, q.num_requests, q.step_overhead, q.kv_transfer,
                            q.router, q.gpu_price, q.expert_parallel, q.engine, Search(
                                sp.devices, sp.tp, sp.pp, sp.replicas, sp.weight_dtype,
                                sp.kv_dtype, sp.max_num_seqs, sp.max_num_batched_tokens,
                                sp.disaggregate, sp.max_gpus, q.policy, sp.prune,
                                sp.capacity))
    origins: dict[str, str] = {}
    s = merged(ctx, built, SEARCH_PATHS, scenario_file, verbose, origins=origins)
    if xlsx is not None:
        check_target(xlsx, force)
    for flag, value in (("--workload", s.workload.file), ("--rate", s.workload.rate),
                        ("--devices", s.search.devices)):
        if value is None:
            raise SpecError(flag, None, "required (or give it in --scenario FILE)")
    loaded = load(s)
    sim, space = s.simulator, s.search
    problem, axes = build_problem(loaded, Path(s.workload.file), s.workload.rate, s.slo.ttft,
                                  s.slo.tpot, s.slo.target, s.scheduler.max_model_len,
                                  s.workload.num_requests, space.policy, sim.step_overhead,
                                  sim.kv_transfer, sim.router, space.capacity), \
        build_axes(loaded, space.devices, space.max_gpus, space.tensor_parallel_sizes,
                   space.pipeline_parallel_sizes, space.replicas, space.weight_dtypes,
                   space.kv_dtypes, space.max_num_seqs, space.max_num_batched_tokens,
                   space.disaggregate, s.parallel.enable_expert_parallel)
    problem = with_release(problem, simulated_row(sim.engine))
    if axes.ratios and space.policy == "static":
        raise SpecError("--policy", space.policy, "a disaggregated pool needs iteration-level "
                        "batching; pass --disaggregate none, or another policy")
    prices = price_table(axes.devices, parse_prices(list(s.prices.gpu_price or [])))
    if trace is not None:
        return answer_fleet(problem, axes, prices, trace, _workers(workers), ray, as_json)
    report = _run(problem, axes, prices, model_id(loaded, s.model.ref), _workers(workers),
                  ray, space.prune, as_json)
    engine = engine_label(sim.engine) | {"memory_rules": problem.memory_row.pin}
    save(s, save_scenario, engine=engine)
    report = {"model": s.model.ref, "workload": s.workload.file, "engine": engine} | report
    _finish(report, as_json, top, xlsx, force, Recording(s, origins))


# Which Scenario fields each of search's flags sets (--workers, --ray and --top shape only
# how it runs and what it shows).
SEARCH_PATHS = {
    "model": ("model.name",), "workload": ("workload.file",), "rate": ("workload.rate",),
    "devices": ("search.devices",), "slo_ttft": ("slo.ttft",), "slo_tpot": ("slo.tpot",),
    "target": ("slo.target",), "max_gpus": ("search.max_gpus",),
    "tp": ("search.tensor_parallel_sizes",), "pp": ("search.pipeline_parallel_sizes",),
    "replicas": ("search.replicas",), "weight_dtype": ("search.weight_dtypes",),
    "kv_dtype": ("search.kv_dtypes",), "max_num_seqs": ("search.max_num_seqs",),
    "max_num_batched_tokens": ("search.max_num_batched_tokens",),
    "disaggregate": ("search.disaggregate",), "max_model_len": ("scheduler.max_model_len",),
    "num_requests": ("workload.num_requests",), "policy": ("search.policy",),
    "step_overhead": ("simulator.step_overhead",), "kv_transfer": ("simulator.kv_transfer",),
    "router": ("simulator.router",), "gpu_price": ("prices.gpu_price",),
    "prune": ("search.prune",), "capacity": ("search.capacity",),
    "expert_parallel": ("parallel.enable_expert_parallel",), "engine": ("simulator.engine",),
}


def search_scenario(model, workload, rate, slo_ttft, slo_tpot, target, max_model_len,
                    num_requests, step_overhead, kv_transfer, router, gpu_price,
                    expert_parallel, engine, space: Search) -> Scenario:
    """The Scenario search's flags describe: the question, and the space it tries."""
    return with_values(replace(DEFAULT, search=space), {
        "model.name": model, "workload.file": None if workload is None else str(workload),
        "workload.rate": rate, "slo.ttft": slo_ttft, "slo.tpot": slo_tpot, "slo.target": target,
        "scheduler.max_model_len": max_model_len, "workload.num_requests": num_requests,
        "simulator.step_overhead": step_overhead, "simulator.kv_transfer": kv_transfer,
        "simulator.router": router, "prices.gpu_price": None if gpu_price is None
        else tuple(gpu_price), "parallel.enable_expert_parallel": expert_parallel,
        "simulator.engine": engine})


def build_problem(loaded, workload_path, rate, slo_ttft, slo_tpot, target, max_model_len,
                  num_requests, policy, step_overhead, kv_transfer, router, capacity) -> Problem:
    if not 0 < rate < 1e6:
        raise SpecError("--rate", rate, "requests per second, > 0")
    slo_target(target)
    if slo_ttft is None and slo_tpot is None:
        raise SpecError("--slo-ttft/--slo-tpot", None, "give at least one latency target, "
                        "e.g. --slo-ttft 1s --slo-tpot 50ms")
    check_policy(policy)  # a bad policy fails here, not in a worker
    if router not in ROUTERS:
        raise SpecError("--router", router, "one of " + ", ".join(ROUTERS))
    slo = SLO(None if slo_ttft is None else parse_duration(slo_ttft, "--slo-ttft"),
              None if slo_tpot is None else parse_duration(slo_tpot, "--slo-tpot"))
    work = with_load(load_workload(workload_path), None, num_requests)
    longest = max(r.prompt_tokens + r.output_tokens for r in at_rate(work, rate))
    context = max_model_len if max_model_len is not None else longest
    if context < longest:
        raise SpecError("--max-model-len", context, f"at least the workload's longest "
                        f"request, {longest:,} tokens")
    checkpoint = serve_spec(PlanFlags(device="80GiB", context=context), loaded).weight_dtype
    return Problem(loaded.spec, checkpoint, work, rate, slo, target, context, policy,
                   step_overhead_s=parse_duration(step_overhead, "--step-overhead"),
                   kv_transfer_bytes_per_s=parse_bandwidth(kv_transfer, "--kv-transfer"),
                   router=router, capacity=capacity)


def build_axes(loaded, devices, max_gpus, tp, pp, replicas, weight_dtype, kv_dtype,
               max_num_seqs, max_num_batched_tokens, disaggregate,
               expert_parallel: bool = False) -> Axes:
    if not 1 <= max_gpus <= 4096:
        raise SpecError("--max-gpus", max_gpus, "a whole number in 1..4,096")
    if expert_parallel and loaded.spec.moe is None:
        raise SpecError("--enable-expert-parallel", True, f"needs a mixture-of-experts model "
                        f"({loaded.spec.name} is dense)")
    own = serve_spec(PlanFlags(device="80GiB", context=1), loaded)
    return Axes(
        devices=parse_devices(devices), tensor_parallel_sizes=parse_counts(tp, "--tp", 64),
        pipeline_parallel_sizes=parse_counts(pp, "--pp", 64),
        weight_dtypes=parse_dtypes(weight_dtype or own.weight_dtype, "--weight-dtype",
                                   dtypes.WEIGHT_DTYPES),
        kv_dtypes=parse_dtypes(kv_dtype or own.kv_dtype, "--kv-dtype", dtypes.KV_DTYPES,
                               own.kv_dtype),
        max_num_seqs=parse_counts(max_num_seqs, "--max-num-seqs", 65_536),
        max_num_batched_tokens=parse_counts(max_num_batched_tokens,
                                            "--max-num-batched-tokens", 1 << 20),
        replicas=None if replicas is None else parse_counts(replicas, "--replicas"),
        ratios=parse_ratios(disaggregate), max_gpus=max_gpus,
        expert_parallel=(False, True) if expert_parallel else (False,))


def with_release(problem: Problem, row: VllmRow | None) -> Problem:
    """The release search assumes (None: plain): its terms price the steps, its rules and its
    default gpu_memory_utilization plan the layouts (plain keeps the newest release's)."""
    if row is None:
        return problem
    return replace(problem, engine=row,
                   safety_fraction=round(1 - row.default_gpu_memory_utilization, 6))


def model_id(loaded, ref: str) -> str:
    """The Hugging Face id the launch lines serve: the model file's hf_id, else what was given."""
    if loaded.path.suffix in (".yaml", ".yml"):
        data = yaml.safe_load(loaded.path.read_text(encoding="utf-8")) or {}
        if isinstance(data, dict) and data.get("hf_id"):
            return str(data["hf_id"])
    return ref


def _workers(workers: int | None) -> int:
    if workers is None:
        return os.cpu_count() or 1
    if not 1 <= workers <= 1024:
        raise SpecError("--workers", workers, "a whole number in 1..1,024")
    return workers


def _run(problem, axes, prices, mid, workers, ray, prune, quiet) -> dict:
    columns = (TextColumn("simulating layouts"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    console = Console(stderr=True)  # stdout holds only the report; no bar in a pipe or log
    with Progress(*columns, disable=quiet or not console.is_terminal, transient=True,
                  console=console) as bar:
        task = bar.add_task("search", total=None)
        return run_search(problem, axes, prices, mid, workers, ray, prune,
                          on_start=lambda n: bar.update(task, total=n),
                          on_done=lambda: bar.advance(task))


def _finish(report: dict, as_json: bool, top: int, xlsx: Path | None, force: bool,
            recording=None) -> None:
    if xlsx is not None:
        from servecap.workbooks.search_sheet import write_search_workbook

        from .files import announce
        announce(write_search_workbook(report, xlsx, force,
                                       recording and recording.rows(None, xlsx)))
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        render_search(report, Console(), top)
    if report["interrupted"]:
        raise fail(f"interrupted: {report['space']['batches_finished']} of "
                   f"{report['space']['num_batches']} layouts finished (shown above)",
                   EXIT_INTERRUPTED)
    if report["cheapest"] is None:
        raise fail(infeasible_line(report), EXIT_DOES_NOT_FIT)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(search))
