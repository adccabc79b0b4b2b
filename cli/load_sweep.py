"""`servecap load --sweep`: the server's SLO capacity, measured (load/sweep.py), on screen,
in --json and in --xlsx."""

import asyncio
import json
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from servecap.ledger.errors import SpecError
from servecap.ledger.units import plural
from servecap.sim.metrics import SLO

from .errors import EXIT_DOES_NOT_FIT, fail
from .load_inputs import PromptFlags, from_requests
from .narrow import print_table
from .steady_view import bounds, half, share_cell

SYNC_REQUESTS = 10  # one at a time: the synchronous rate, the ladder's start


@dataclass(frozen=True)
class SweepPlan:
    """The workload, how each step is bounded (requests, seconds) and what it must meet."""

    workload: object  # sim.workload.Workload
    num_requests: int
    duration_s: float | None
    slo: SLO
    target: float
    tolerance: float


def check_plan(workload, num_requests: int | None, duration_s: float | None, slo: SLO,
               target: float, tolerance: float) -> SweepPlan:
    if workload is None or workload.arrivals.kind == "fixed":
        raise SpecError("--workload", None if workload is None else workload.name,
                        "--sweep needs a workload whose arrivals a rate can replace (poisson, "
                        "gamma or bursts): the sweep sets its own rates")
    if all(t is None for t in (slo.ttft_s, slo.itl_s, slo.e2e_s)):
        raise SpecError("--slo-ttft/--slo-tpot", None, "--sweep needs at least one latency "
                        "target: the capacity is the highest rate that meets them")
    return SweepPlan(workload, num_requests or workload.num_requests, duration_s, slo,
                     target, tolerance)


def run_sweep(plan: SweepPlan, make_spec, flags: PromptFlags, quiet: bool) -> dict:
    """make_spec(conversations, concurrency, duration_s) -> LoadSpec; each step runs the
    workload's first num_requests at its rate, none started after duration_s."""
    from servecap.load.sweep import sweep_capacity
    from servecap.sim.sampling import at_rate

    def requests_at(rate: float | None) -> list:
        drawn = at_rate(plan.workload, rate or 1.0)[:plan.num_requests]
        return drawn if rate else [replace(r, arrival_s=0.0) for r in drawn]

    console = Console(stderr=True)  # stdout holds only the report; no bar in a pipe or log
    with Progress(disable=quiet or not console.is_terminal, transient=True,
                  console=console) as bar:
        task = bar.add_task("sweeping offered load", total=None)

        def measure(rate: float | None, concurrency: int | None = None, count=None) -> dict:
            reqs = requests_at(rate)[:count]
            bar.update(task, description=f"{rate or 'all at once'} req/s: "
                                         f"{plural(len(reqs), 'request')}")
            spec = make_spec(from_requests(reqs, flags), concurrency, plan.duration_s)
            window = _window(spec, plan.slo)
            bar.advance(task)
            return window

        synchronous = measure(None, 1, SYNC_REQUESTS)["achieved_rps"]
        saturation = measure(None)["achieved_rps"]
        if not synchronous or not saturation:
            raise fail("no request completed one at a time or all at once: nothing to sweep",
                       EXIT_DOES_NOT_FIT)
        return sweep_capacity(measure, plan.target, synchronous, saturation, plan.tolerance)


def _window(spec, slo: SLO) -> dict:
    from servecap.load.report import measured_seqs
    from servecap.load.runner import run_load
    from servecap.load.steady import steady_window

    sent, start = asyncio.run(run_load(spec))
    return steady_window(measured_seqs(sent, start), (), slo)


def report_sweep(report: dict, as_json: bool, xlsx: Path | None, force: bool) -> None:
    if xlsx is not None:
        from .load_xlsx import write_sweep_workbook

        write_sweep_workbook(report, xlsx, force)
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        render_sweep(report, Console())


def render_sweep(report: dict, console: Console) -> None:
    console.print(f"[bold]{report['base_url']}[/bold] model {report['model']}, "
                  f"{report['source']}: SLO capacity sweep ({report['slo_text']})")
    table = Table(title="measured offered-load sweep (latency: p99 ms)")
    for col in ("offered\nreq/s", "achieved\nreq/s", "SLO\nmet %", "verdict", "TTFT", "TPOT",
                "e2e"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in report["points"]:
        met = share_cell(p["slo_attainment"], p["slo_attainment_ci"])
        table.add_row(f"{p['rate_per_s']:,.2f}" + (" <" if p["is_capacity"] else ""),
                      f"{p['achieved_rps']:,.2f}",
                      met + ("*" if p["overloaded"] else "") + ("" if p["steady_state"] else "!"),
                      p["verdict"], *(_ms(p[k]["p99"]) for k in ("ttft_ms", "tpot_ms",
                                                                  "e2e_ms")))
    print_table(console, table)
    console.print("<: the capacity's run; *: the queue grew through the run (not sustainable, "
                  "whatever its share); !: the run did not reach steady state (every request "
                  "measured)", style="dim")
    console.print(capacity_line(report))


def capacity_line(report: dict) -> str:
    return (f"capacity: {report['capacity_rps']:,.2f}"
            f"{half(report['capacity_rps'], report['capacity_rps_ci'])} req/s at >= "
            f"{report['target_attainment']:.0%} SLO attainment (95 %: "
            f"{bounds(report['capacity_rps_ci'])}; "
            f"bisected to {report['capacity_tolerance']:.0%}; limited by "
            f"{report['capacity_limited_by']}; synchronous {report['synchronous_rps']:,.2f} "
            f"req/s, saturation {report['saturation_rps']:,.2f} req/s)")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
