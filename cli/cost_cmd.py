"""`servecap cost`: dollars per million output tokens and the break-even against an API."""

import json
import math
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.errors import SpecError
from servecap.sim.cost import cost_report
from servecap.sim.metrics import summarize
from servecap.sim.run import simulate
from servecap.sim.sweep import saturated

from . import sim_options as o
from .sim_inputs import SimFlags, build_setup

MIN_TOKENS_PER_S = 1e-6
Opt = typer.Option


def cost(model: Annotated[str | None, typer.Argument(
             help="Model to simulate at saturation (omit with --tokens-per-s).")] = None,
         gpu_price: Annotated[float, Opt(help="Dollars per GPU-hour.")] = 2.0,
         utilization: Annotated[float, Opt(help="Share of the hour the GPU does useful "
                                           "work.")] = 1.0,
         api_price: Annotated[float | None, Opt(help="API dollars per million output tokens "
                                                "to break even against.")] = None,
         tokens_per_s: Annotated[float | None, Opt(help="Measured output tokens/s (instead "
                                                   "of simulating).")] = None,
         device: o.Device = None, bandwidth: o.Bandwidth = None, flops: o.Flops = None,
         step_overhead: o.StepOverhead = "0ms", workload: o.Workload = None,
         policy: Annotated[str, Opt(help="Scheduler policy simulated.")] = "continuous",
         tensor_parallel_size: o.TensorParallel = 1,
         pipeline_parallel_size: o.PipelineParallel = 1,
         speed_of_light: o.SpeedOfLight = False, as_json: o.Json = False) -> None:
    """Self-hosted $ per million output tokens at full load and at --utilization.

    Output tokens/s come from --tokens-per-s, or from simulating MODEL's --workload with
    every request offered at once (the saturation throughput). Examples:

      servecap cost --tokens-per-s 1000 --gpu-price 2 --utilization 0.3 --api-price 0.6
      servecap cost llama-3.1-8b --device h100-80gb --workload workloads/chat.yaml --gpu-price 2
    """
    if tokens_per_s is not None and not MIN_TOKENS_PER_S <= tokens_per_s < math.inf:
        raise SpecError("--tokens-per-s", tokens_per_s, f"output tokens/s, at least "
                        f"{MIN_TOKENS_PER_S:g} (a slower rate prices a token past any float)")
    rate, source = tokens_per_s, "given"
    if rate is None:
        rate, source = _simulated_rate(model, SimFlags(
            device, bandwidth, flops, step_overhead, None, workload, None, (policy,),
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size, speed_of_light=speed_of_light))
    num_gpus = tensor_parallel_size * pipeline_parallel_size
    report = cost_report(gpu_price * num_gpus, rate, utilization, api_price) | {
        "tokens_source": source, "num_gpus": num_gpus, "gpu_price_per_h": gpu_price}
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        _render(report, Console())


def _simulated_rate(model: str | None, flags: SimFlags) -> tuple[float, str]:
    if model is None or flags.workload is None:
        raise SpecError("--tokens-per-s", None, "give measured output tokens/s, or a MODEL "
                        "and --workload to simulate")
    setup = build_setup(model, flags)
    result = simulate(saturated(setup.workload), setup.coefficients, setup.configs[0],
                      setup.num_blocks)
    rate = summarize(result)["output_tokens_per_s"]
    return rate, f"simulated saturation, {flags.policies[0]}, {flags.workload}"


def _render(report: dict, console: Console) -> None:
    console.print(f"{report['output_tokens_per_s']:,.1f} output tokens/s "
                  f"({report['tokens_source']}) at ${report['gpu_price_per_h']:g}/GPU-hour"
                  f" x {report['num_gpus']} GPU(s)")
    console.print(f"full load:           ${report['usd_per_million_full_load']:,.2f} per "
                  "million output tokens")
    console.print(f"at {report['utilization']:.0%} utilization: "
                  f"${report['usd_per_million_at_utilization']:,.2f} per million")
    if "break_even_utilization" in report:
        share = report["break_even_utilization"]
        verdict = "never (above 100 %)" if share > 1 else f"{share:.1%}"
        console.print(f"break-even vs API at ${report['api_price_per_million']:g}/million: "
                      f"utilization {verdict}")
