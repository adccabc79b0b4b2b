"""`servecap sweep`: the capacity envelope, the highest offered rate that meets the SLOs."""

import json
import math
from dataclasses import replace
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from servecap.ledger.errors import SpecError
from servecap.scenario import simulation, steps
from servecap.scenario.spec import DEFAULT as D
from servecap.scenario.spec import with_values
from servecap.scenario.values import slo_target
from servecap.sim.deploy import run_deployment
from servecap.sim.metrics import summarize
from servecap.sim.run import simulate
from servecap.sim.sizing import run_size
from servecap.sim.sweep import closed_loop_points, run_sweep

from . import sim_options as o
from .errors import EXIT_DOES_NOT_FIT, fail, handle_errors
from .narrow import print_table
from .option_groups import options_from
from .plan_cmd import print_fetch_report
from .scenario_opts import SaveScenario, ScenarioFile, merged, save
from .sim_inputs import SIM_PATHS, Setup, SimFlags, batch_in_effect, sim_flags, sim_scenario
from .sim_view import render_coefficients, tokens_per_s
from .sim_xlsx import check_target, write_simulated_workbook
from .simulate_header import header
from .steady_view import bounds, half, share_cell
from .workbook_scenario import Recording

SWEEP_PATHS = {k: v for k, v in SIM_PATHS.items() if k not in ("trace", "rate")} | {
    "target": ("slo.target",), "rates": ("simulator.rates",),
    "num_rates": ("simulator.num_rates",)}
MAX_NUM_RATES = 200  # each rate is a whole simulation; 200 already resolves a knee finely


@options_from(o.SimOptions, "opts", after="model")
def sweep(ctx: typer.Context, model: o.OptionalModel = None,
          policy: Annotated[str | None, o.Eng(help="One scheduler policy. Default: "
                                              + steps.DEFAULT_POLICY_HELP + ".",
                                              show_default=False)] = None,
          target: Annotated[float, o.Slo(help="SLO attainment the capacity must reach (share "
                                         "of requests).")] = D.slo.target,
          rates: Annotated[str | None, o.Wkl(help="Offered rates (req/s), e.g. 1,2,4,8. "
                                         "Default: evenly up to the simulated saturation "
                                         "rate.")] = None,
          num_rates: Annotated[int, o.Wkl(help="Rates in the default sweep.")]
          = D.simulator.num_rates,
          num_requests: o.CeilingRequests = None, as_json: o.Json = False,
          xlsx: o.Xlsx = None, force: o.XlsxForce = False, verbose: o.Verbose = False,
          scenario_file: ScenarioFile = None, save_scenario: SaveScenario = None,
          opts: o.SimOptions = o.NO_SIM_OPTIONS) -> None:
    """Sweep open-loop offered load; stop when the SLO fails; report the capacity.

    Rates run from the synchronous rate (one request at a time) to saturation, or --rates,
    each until steady state (at most --num-requests requests). The capacity is the highest
    rate where --target of the requests meet every SLO, bisected to 2 %, with its 95 %
    interval. Example:

      servecap sweep llama-3.1-8b --device h100-80gb --workload workloads/chat.yaml \\
          --slo-ttft 500ms --slo-itl 50ms

    Exit 0 when a rate meets the SLO target, 1 when none does (the sweep is still printed and
    written), 2 for bad input.
    """
    policy = policy or steps.default_policy(steps.simulated_row(
        opts.engine, opts.speed_of_light, opts.coefficients))
    flags = SimFlags(**opts.values(), policies=(policy,), num_requests=num_requests)
    built = with_values(sim_scenario(model, flags, opts.seeds), {
        "slo.target": target, "simulator.rates": rates, "simulator.num_rates": num_rates})
    origins: dict[str, str] = {}
    scenario = merged(ctx, built, SWEEP_PATHS, scenario_file, verbose, origins=origins)
    if xlsx is not None:
        check_target(xlsx, force)
    setup = simulation.setup(scenario)
    if verbose:
        print_fetch_report(setup.hub)
    sim = scenario.simulator
    report = header(setup) | run_envelope(setup, scenario.slo.target, _rates(sim.rates),
                                          sim.num_rates, as_json, num_seeds=sim.seeds)
    save(scenario, save_scenario, setup.plan, batch_in_effect(setup), engine=setup.engine)
    if xlsx is not None:
        entry, note = capacity_point(report)
        write_simulated_workbook(scenario.model.ref, sim_flags(scenario), setup, entry, xlsx,
                                 force, note, Recording(scenario, origins))
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        render_sweep(report, Console())
    if not report["capacity_rps"]:
        raise fail("no swept rate met the SLO target (reported above)", EXIT_DOES_NOT_FIT)


def run_envelope(setup: Setup, target: float, rates, num_rates: int, quiet: bool,
                 num_seeds: int = 1) -> dict:
    """The sweep of setup's workload, each rate run until steady with at most the workload's
    count of requests, step-time spreads drawn over num_seeds seeds."""
    slo_target(target)
    if not 1 <= num_rates <= MAX_NUM_RATES:
        raise SpecError("--num-rates", num_rates, f"a whole number from 1 to {MAX_NUM_RATES}")
    cfg = replace(setup.configs[0], concurrency=None)
    closed = setup.configs[0].concurrency

    def run(requests):  # the last outcome: the disaggregated one when asked for
        return run_deployment(requests, setup.coefficients, cfg, setup.num_blocks,
                              setup.deployment, setup.slo, num_seeds)[-1].summary

    def one_at_a_time(requests):
        single = replace(cfg, max_num_seqs=1)
        return summarize(simulate(requests, setup.coefficients, single, setup.num_blocks))

    if setup.workload is None or setup.workload.arrivals.kind == "fixed":
        raise SpecError("--workload", setup.source, "a workload whose arrivals a rate can "
                        "replace (poisson, gamma or bursts): a sweep sets its own rates")
    size = run_size(setup.coefficients, setup.requests, setup.workload.num_requests)
    total = len(rates) if rates else num_rates
    console = Console(stderr=True)  # stdout holds only the report; no bar in a pipe or log
    with Progress(disable=quiet or not console.is_terminal, transient=True,
                  console=console) as bar:
        task = bar.add_task("sweeping offered load", total=total)
        slo = setup.slo
        result = run_sweep(setup.workload, run, target, size, rates, num_rates,
                           on_point=lambda _: bar.advance(task),
                           run_one_at_a_time=one_at_a_time,
                           bisect=any(t is not None for t in (slo.ttft_s, slo.itl_s, slo.e2e_s)))
    if closed is not None:
        result["closed_loop_points"] = closed_loop_points(
            setup.workload, lambda reqs, n: run_deployment(
                reqs, setup.coefficients, replace(cfg, concurrency=n), setup.num_blocks,
                setup.deployment, setup.slo, num_seeds)[0].summary, closed, target)  # one engine
    return {"policy": cfg.policy, "deployment": setup.deployment.label} | result


def capacity_point(report: dict) -> tuple[dict, str]:
    """The run the Latency record holds: the one at the capacity (capacity.capacity's
    bisection), or the lowest rate swept when none meets the target (said so in the
    record's source)."""
    point = report["capacity_point"] or report["points"][0]
    offered = point["rate_per_s"]  # the simulated rate: the record's offered rate and its note
    note = (f"run at the capacity, {offered:.2f} req/s offered" if report["capacity_point"]
            else f"no swept rate met the SLO target; the lowest, {offered:.2f} req/s offered")
    envelope = [{"rate_per_s": p["rate_per_s"], "achieved_rps": p["achieved_rps"],
                 "slo_attainment": p["slo_attainment"], "goodput_rps": p["goodput_rps"],
                 "output_tokens_per_s": p["output_tokens_per_s"],
                 "ttft_p99_ms": p["ttft_ms"]["p99"], "itl_p99_ms": p["itl_ms"]["p99"],
                 "tpot_p99_ms": p["tpot_ms"]["p99"], "e2e_p99_ms": p["e2e_ms"]["p99"],
                 "meets_slo": p["meets_slo"]}
                for p in report["points"]]
    return point | {"offered_rps": offered, "policy": report["policy"],
                    "deployment": report["deployment"], "sweep": envelope}, note


SWEEP_NOTES = ("SLO met: % of requests meeting every target, ± half its 95 % interval (its "
               "bounds in brackets where it is not symmetric); the "
               "TPOT target (--slo-tpot) is checked on each request's TPOT column, not on "
               "ITL. ~: the interval straddles the target (not a pass); !: the run did not "
               "reach steady state (every request measured); *: offered at or above the "
               "saturation rate, or a queue that grew through the run: not sustainable, "
               "whatever its share.")


def render_sweep(report: dict, console: Console) -> None:
    render_coefficients(report, console)
    table = Table(title=f"{report['policy']}: offered load sweep (latency: p99 ms)")
    for col in ("offered\nreq/s", "achieved\nreq/s", "SLO\nmet %", "goodput\nreq/s",
                "out\ntok/s", "TTFT", "ITL", "TPOT", "e2e"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in report["points"]:
        table.add_row(f"{p['rate_per_s']:,.2f}", f"{p['achieved_rps']:,.2f}", _met(p),
                      f"{p['goodput_rps']:,.2f}",
                      tokens_per_s(p['output_tokens_per_s']),
                      *(_p99(p[k]) for k in ("ttft_ms", "itl_ms", "tpot_ms",
                                                       "e2e_ms")))
    print_table(console, table, drop=("achieved\nreq/s", "out\ntok/s"))
    console.print(SWEEP_NOTES, style="dim")
    if "closed_loop_points" in report:
        _render_closed(report["closed_loop_points"], console)
    console.print(capacity_line(report))
    short = [p for p in report["points"] if not p["steady_state"]]
    if short:
        console.print(f"warning: {len(short)} of {len(report['points'])} rates did not reach "
                      f"steady state (marked !): give them more requests (--num-requests)",
                      style="yellow")


def capacity_line(report: dict) -> str:
    if report["capacity_rps_ci"] is None:
        return (f"capacity: {report['capacity_rps']:,.2f} req/s, the highest swept rate ("
                f"{report['capacity_limited_by']}; synchronous {report['synchronous_rps']:,.2f}"
                f" req/s, saturation {report['saturation_rps']:,.2f} req/s)")
    steady = "" if report["capacity_steady_state"] or not report["capacity_rps"] else \
        "; its run did not reach steady state"
    return (f"capacity: {report['capacity_rps']:,.2f}"
            f"{half(report['capacity_rps'], report['capacity_rps_ci'])} req/s at >= "
            f"{report['target_attainment']:.0%} SLO attainment (95 %: "
            f"{bounds(report['capacity_rps_ci'])};"
            f" bisected to {report['capacity_tolerance']:.0%}; limited by "
            f"{report['capacity_limited_by']}{steady}; synchronous "
            f"{report['synchronous_rps']:,.2f} req/s, saturation "
            f"{report['saturation_rps']:,.2f} req/s)")


def _met(point: dict) -> str:
    text = share_cell(point["slo_attainment"], point.get("slo_attainment_ci"))
    mark = "*" if not point["sustainable"] else "~" if point["verdict"] == "marginal" else ""
    return text + mark + ("" if point["steady_state"] else "!")


def _render_closed(points: list[dict], console: Console) -> None:
    table = Table(title="closed loop (N in flight; latency: p99 ms)")
    for col in ("in flight", "achieved req/s", "SLO met", "out tok/s", "TTFT", "TPOT",
                "e2e"):
        table.add_column(col, justify="right")
    for p in points:
        table.add_row(str(p["concurrency"]), f"{p['achieved_rps']:,.2f}",
                      _met(p), tokens_per_s(p['output_tokens_per_s']),
                      *(_p99(p[k]) for k in ("ttft_ms", "tpot_ms", "e2e_ms")))
    print_table(console, table, drop=("achieved req/s", "out tok/s"))


def _p99(stats: dict) -> str:
    value = stats["p99"]
    return "-" if value is None else f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def _rates(text: str | None) -> list[float] | None:
    if text is None:  # not given: the default sweep ('' is a value, and no rates)
        return None
    try:
        values = [float(v) for v in text.split(",")]  # '1,,2' is a typo, not two rates
    except ValueError:
        values = []
    if not values or not all(0 < v < math.inf for v in values):
        raise SpecError("--rates", text, "comma-separated finite request rates > 0, e.g. "
                        "1,2,4")
    return sorted(values)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(sweep))
