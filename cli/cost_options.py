"""The option groups `servecap cost` takes beside the device's: the load it simulates and the
prices it applies, each in its help panel, received as one value each."""

import functools
from dataclasses import dataclass
from typing import Annotated

import typer

from servecap.scenario.spec import DEFAULT as D
from servecap.scenario.steps import policy_default_help

from . import sim_options as o

PRICES = "Prices"
Prc = functools.partial(typer.Option, rich_help_panel=PRICES)


@dataclass(frozen=True)
class CostLoad:
    """What cost simulates for its tokens/s (simulate's flags of the same names) and the SLO
    attainment its capacity must reach."""

    workload: o.Workload = None
    policy: Annotated[str | None, o.Wkl(help="Scheduler policy simulated. Default: "
                                        + policy_default_help("--speed-of-light") + ".",
                                        show_default=False)] = None
    slo_ttft: o.SloTtft = None
    slo_itl: o.SloItl = None
    target: Annotated[float, o.Slo(help="SLO attainment the capacity must reach (share of "
                                   "requests).")] = D.slo.target
    replicas: o.Replicas = D.simulator.replicas
    num_requests: o.CeilingRequests = None
    input_len: o.InputLen = None
    output_len: o.OutputLen = None


@dataclass(frozen=True)
class CostPrices:
    """What the hours cost, and the API prices to break even against (the scenario's prices
    section)."""

    gpu_price: Annotated[float, Prc(help="On-demand dollars per GPU-hour.")] = \
        D.prices.usd_per_gpu_hour
    reserved_price: Annotated[float | None, Prc(help="Reserved (committed) dollars per "
                                                "GPU-hour, priced beside on-demand.")] = None
    utilization: Annotated[float, Prc(help="Share of the hour the GPU does useful work.")] = \
        D.prices.utilization
    api_price: Annotated[float | None, Prc(help="API dollars per million output tokens to "
                                           "break even against.")] = None
    input_price: Annotated[float | None, Prc(help="API dollars per million input tokens "
                                             "(with --api-price).")] = None


NO_LOAD, NO_PRICES = CostLoad(), CostPrices()
