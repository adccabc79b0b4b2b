"""`servecap search --rate-trace`: the fleet for each hour of a day and when to scale up."""

import json

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servecap.sim.search.fleet import run_fleet

from .errors import EXIT_DOES_NOT_FIT, EXIT_INTERRUPTED, fail

SHORT = ("running", "waiting", "KV usage")  # the metrics' columns, named in full below


def answer_fleet(problem, axes, prices, trace, workers: int, ray: str | None,
                 as_json: bool) -> None:
    """Run the fleet question, print it (JSON or tables); exit 1 when an hour has no fleet
    that meets the SLOs, 130 when interrupted."""
    console = Console(stderr=True)
    columns = (TextColumn("pricing one replica of each layout"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=as_json or not console.is_terminal, transient=True,
                  console=console) as bar:
        task = bar.add_task("fleet", total=None)
        report = run_fleet(problem, axes, prices, trace, workers, ray,
                           on_start=lambda n: bar.update(task, total=n),
                           on_done=lambda: bar.advance(task))
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        render_fleet(report, Console())
    if report["interrupted"]:
        raise fail(f"interrupted: {report['space']['layouts_priced']} of "
                   f"{report['space']['layouts_fit']} layouts priced (shown above)",
                   EXIT_INTERRUPTED)
    if report["cost_usd_per_day"] is None:
        raise fail("no layout meets the SLOs at some hour's rate (layout '-' above)",
                   EXIT_DOES_NOT_FIT)


def render_fleet(report: dict, console: Console) -> None:
    hours = Table(title=f"cheapest fleet per hour (SLOs met by "
                  f"{report['target_attainment']:.0%} of requests)")
    for name in ("hour", "req/s", "layout", "replicas", "GPUs", "$/h"):
        hours.add_column(name, justify="left" if name == "layout" else "right")
    for h in report["hours"]:
        hours.add_row(str(h["hour"]), f"{h['rate_per_s']:g}", h["layout"] or "-",
                      _n(h["replicas"]), _n(h["num_gpus"]),
                      "-" if h["cost_usd_per_hour"] is None else f"{h['cost_usd_per_hour']:.2f}")
    console.print(hours)
    day = report["cost_usd_per_day"]
    console.print(f"day: {'-' if day is None else f'${day:,.2f}'}")
    used = {h["layout"] for h in report["hours"] if h["layout"]}
    gauges = Table(title="scale up when one replica's gauge stays above (its average at "
                   "its SLO capacity)")
    for name in ("layout", "capacity req/s", *SHORT):
        gauges.add_column(name, justify="left" if name == "layout" else "right")
    for rep in report["replicas"]:
        if rep["layout"] in used:
            t = rep["scale_up_thresholds"]
            gauges.add_row(rep["layout"], f"{rep['capacity_rps']:.2f}",
                           *(_g(t[m]) for m in report["metrics"]))
    console.print(gauges)
    console.print(", ".join(f"{short}: {name}" for short, name in zip(
        SHORT, report["metrics"], strict=True)))


def _n(value) -> str:
    return "-" if value is None else f"{value:,}"


def _g(value) -> str:
    return "-" if value is None else f"{value:g}"
