"""`servecap cost`: dollars per million output tokens and the break-even against an API."""

import functools
import json
import math
from dataclasses import asdict
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Parallel
from servecap.ledger.units import plural
from servecap.scenario import steps
from servecap.scenario.spec import with_values
from servecap.scenario.values import slo_target
from servecap.sim.cost import cost_report, reserved_report
from servecap.sim.deploy import run_deployment
from servecap.sim.sweep import saturated

from . import sim_options as o
from .cost_options import NO_LOAD, NO_PRICES, CostLoad, CostPrices
from .errors import handle_errors
from .option_groups import options_from
from .scenario_opts import SaveScenario, ScenarioFile, merged, save
from .sim_inputs import SIM_PATHS, SimFlags, build_setup, sim_flags, sim_scenario
from .steady_view import bounds

MIN_TOKENS_PER_S = 1e-6
COST_PATHS = {name: SIM_PATHS[name] for name in (
    "model", "device", "bandwidth", "flops", "step_overhead", "workload", "policy", "slo_ttft",
    "slo_itl", "tensor_parallel_size", "pipeline_parallel_size", "replicas", "speed_of_light",
    "num_requests", "input_len", "output_len", "engine")} | {
    "gpu_price": ("prices.usd_per_gpu_hour",),
    "reserved_price": ("prices.reserved_usd_per_gpu_hour",),
    "utilization": ("prices.utilization",), "api_price": ("prices.api_usd_per_million_output",),
    "input_price": ("prices.api_usd_per_million_input",), "target": ("slo.target",)}
Measured = functools.partial(typer.Option, rich_help_panel="Measured throughput (instead of "
                             "simulating)")


@options_from(o.RooflineOptions, "rig", after="model")
@options_from(CostLoad, "load", after="model")
@options_from(CostPrices, "paid", after="model")
def cost(ctx: typer.Context, model: Annotated[str | None, typer.Argument(
             help="Model to simulate (omit with --tokens-per-s).")] = None,
         tokens_per_s: Annotated[float | None, Measured(help="Measured output tokens/s of the "
                                                        "whole deployment (instead of "
                                                        "simulating).")] = None,
         input_tokens_per_s: Annotated[float | None, Measured(help="Measured input tokens/s "
                                                              "(with --tokens-per-s).")] = None,
         as_json: o.Json = False, scenario_file: ScenarioFile = None,
         save_scenario: SaveScenario = None, rig: o.RooflineOptions = o.NO_ROOFLINE,
         load: CostLoad = NO_LOAD, paid: CostPrices = NO_PRICES) -> None:
    """Self-hosted $ per million output tokens at full load and at --utilization.

    Output tokens/s come from --tokens-per-s, or from simulating MODEL's
    --workload: at the capacity under --slo-ttft/--slo-tpot (as sweep finds
    it), else with every request offered at once (saturation). Every GPU is
    paid for: -tp x -pp x --replicas. Examples:

      servecap cost --tokens-per-s 1000 --gpu-price 2 --utilization 0.3
      servecap cost llama-3.1-8b --device h100-80gb \\
          --workload workloads/chat.yaml --slo-ttft 500ms --slo-tpot 50ms
    """
    if model is not None and tokens_per_s is not None:  # it would be read and then ignored
        raise SpecError("MODEL", model, "not with --tokens-per-s: a measured rate is priced as "
                        "given; drop MODEL, or drop --tokens-per-s to simulate MODEL")
    policy = load.policy or steps.default_policy(steps.simulated_row(rig.engine,
                                                                     rig.speed_of_light))
    flags = SimFlags(**asdict(rig), workload=load.workload, policies=(policy,),
                     slo_ttft=load.slo_ttft, slo_itl=load.slo_itl, replicas=load.replicas,
                     num_requests=load.num_requests, input_len=load.input_len,
                     output_len=load.output_len)
    built = with_values(sim_scenario(model, flags), {"slo.target": load.target} | {
        COST_PATHS[name][0]: value for name, value in asdict(paid).items()})
    origins: dict[str, str] = {}
    scenario = merged(ctx, built, COST_PATHS, scenario_file, origins=origins)
    model, flags, prices = scenario.model.ref, sim_flags(scenario), scenario.prices
    gpu_price, reserved_price = prices.usd_per_gpu_hour, prices.reserved_usd_per_gpu_hour
    rates = _rates(model, flags, tokens_per_s, input_tokens_per_s,
                   slo_target(scenario.slo.target))  # checked where no SLO reads it too
    num_gpus = _num_gpus(flags)
    report = _priced(rates, num_gpus, gpu_price, prices.utilization,
                     prices.api_usd_per_million_output, prices.api_usd_per_million_input)
    # servecap's stand-in price when neither --gpu-price nor the scenario gave one
    report["gpu_price_source"] = "given" if "prices.usd_per_gpu_hour" in origins else "default"
    if reserved_price is not None:
        report |= {"reserved_price_per_h": reserved_price,
                   "reserved_pays_above_utilization": reserved_price / gpu_price}
        report |= reserved_report(reserved_price * num_gpus, report)
    _check_finite(report)
    save(scenario, save_scenario, engine=report.get("engine"))
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        _render(report, Console())


def _num_gpus(flags: SimFlags) -> int:
    """Every GPU paid for: -tp x -pp per replica (the ledger's Parallel, which names a bad size
    by its flag) x --replicas. Checked here, before a count of 0 makes the hourly price 0 and
    the price check blames --gpu-price."""
    per_replica = Parallel(flags.tensor_parallel_size, flags.pipeline_parallel_size).world_size
    if not isinstance(flags.replicas, int) or flags.replicas < 1:
        raise SpecError("--replicas", flags.replicas, "a whole number >= 1")
    return per_replica * flags.replicas


def _check_finite(report: dict) -> None:
    """Prices and rates each in range can still overflow together (5e-324 $/1e6 makes a
    break-even of inf): refuse the result in one line rather than print inf or fail in JSON."""
    for key, value in report.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise SpecError(key, value, "the prices and rates given overflow a float here; "
                            "check --gpu-price, --api-price, --input-price and the tokens/s "
                            "(dollars and tokens of everyday magnitude)")


def _priced(rates: dict, num_gpus: int, gpu_price: float, utilization: float,
            api_price: float | None, input_price: float | None) -> dict:
    """cost_report for the whole deployment's $/h, with where its tokens/s came from."""
    rates = dict(rates)
    if input_price is not None and (api_price is None or rates["input_tokens_per_s"] is None):
        raise SpecError("--input-price", input_price, "an API's input price needs --api-price "
                        "and input tokens/s (--input-tokens-per-s, or a simulated workload)")
    report = cost_report(gpu_price * num_gpus, rates.pop("output_tokens_per_s"), utilization,
                         api_price, rates.pop("input_tokens_per_s"), input_price)
    return report | rates | {"num_gpus": num_gpus, "gpu_price_per_h": gpu_price,
                             "deployment_usd_per_h": gpu_price * num_gpus}


def _rates(model: str | None, flags: SimFlags, tokens_per_s: float | None,
           input_tokens_per_s: float | None, target: float) -> dict:
    """Output and input tokens/s, where they come from, and the capacity they were taken at."""
    slo_given = flags.slo_ttft is not None or flags.slo_itl is not None
    if tokens_per_s is None:
        return _simulated(model, flags, target) if slo_given else _saturation(model, flags)
    if slo_given:
        raise SpecError("--slo-ttft/--slo-tpot", flags.slo_ttft or flags.slo_itl, "price a "
                        "simulated capacity: give MODEL and --workload, not --tokens-per-s")
    for name, value in (("--tokens-per-s", tokens_per_s),
                        ("--input-tokens-per-s", input_tokens_per_s)):
        if value is not None and not MIN_TOKENS_PER_S <= value < math.inf:
            raise SpecError(name, value, f"tokens/s, at least {MIN_TOKENS_PER_S:g} (a slower "
                            "rate prices a token past any float)")
    return {"output_tokens_per_s": tokens_per_s, "input_tokens_per_s": input_tokens_per_s,
            "tokens_source": "given", "priced_at": "given"}


def _need_workload(model: str | None, flags: SimFlags) -> None:
    if model is None or (flags.workload is None and flags.input_len is None):
        raise SpecError("--tokens-per-s", None, "give measured output tokens/s, or a MODEL "
                        "and --workload to simulate")


def _saturation(model: str | None, flags: SimFlags) -> dict:
    _need_workload(model, flags)
    setup = build_setup(model, flags)
    summary = run_deployment(saturated(setup.workload), setup.coefficients, setup.configs[0],
                             setup.num_blocks, setup.deployment, setup.slo)[-1].summary
    return {"output_tokens_per_s": summary["output_tokens_per_s"],
            "input_tokens_per_s": summary["input_tokens_per_s"], "priced_at": "saturation",
            "engine": setup.engine,
            "tokens_source": f"simulated saturation, {flags.policies[0]}, "
                             f"{_engine_words(setup.engine)}, {flags.workload or 'fixed shape'}"}


def _simulated(model: str | None, flags: SimFlags, target: float) -> dict:
    """The sweep's capacity point: the highest offered rate where `target` of the requests
    meet every SLO (servecap sweep's own functions)."""
    from .sweep_cmd import capacity_point, run_envelope

    _need_workload(model, flags)
    setup = build_setup(model, flags)
    report = run_envelope(setup, target, None, 10, True)
    point, _ = capacity_point(report)
    if not point["meets_slo"]:
        raise SpecError("--slo-ttft/--slo-tpot", flags.slo_ttft or flags.slo_itl,
                        f"targets met by {target:.0%} of requests at some swept rate: none "
                        f"was, down to {point['rate_per_s']:.2f} req/s")
    return {"output_tokens_per_s": point["output_tokens_per_s"],
            "input_tokens_per_s": point["input_tokens_per_s"], "priced_at": "slo_capacity",
            "capacity_rps": point["rate_per_s"], "target_attainment": target,
            "capacity_rps_ci": report["capacity_rps_ci"],
            "capacity_steady_state": report["capacity_steady_state"], "engine": setup.engine,
            "tokens_source": f"simulated SLO capacity, {point['rate_per_s']:.2f} req/s, "
                             f"{flags.policies[0]}, {_engine_words(setup.engine)}, "
                             f"{flags.workload or 'fixed shape'}"}


def _engine_words(engine: dict) -> str:
    """The release simulated, for the tokens' source: 'vllm==0.21.0 (the default)'."""
    return engine["simulated"] + (" (the default)" if engine["default"] else "")


def _render(report: dict, console: Console) -> None:
    console.print(f"{report['output_tokens_per_s']:,.1f} output tokens/s "
                  f"({report['tokens_source']})")
    if report.get("capacity_rps_ci"):
        console.print(f"SLO capacity {report['capacity_rps']:,.2f} req/s (95 %: "
                      f"{bounds(report['capacity_rps_ci'])})"
                      + ("" if report["capacity_steady_state"] else
                         "; warning: its run did not reach steady state"))
    console.print(f"on {plural(report['num_gpus'], 'GPU')} at "
                  f"${report['gpu_price_per_h']:g}/GPU-hour"
                  f" on demand: ${report['deployment_usd_per_h']:,.2f} per hour")
    if report.get("gpu_price_source") == "default":
        console.print(f"note: --gpu-price not given: ${report['gpu_price_per_h']:g}/GPU-hour "
                      "assumed", style="yellow", highlight=False)
    labels = ("full load:", f"at {report['utilization']:.0%} utilization:")
    if report["utilization"] == 1:  # the same price twice: full load is 100 % utilization
        labels = ("full load (100% utilization):",)
    width = max(map(len, labels))  # the two prices in one column, whatever the share's digits
    for label, key in zip(labels, ("usd_per_million_full_load",
                                   "usd_per_million_at_utilization"), strict=False):
        console.print(f"{label:<{width}} ${report[key]:,.2f} per million output tokens")
    if "break_even_utilization" in report:
        console.print(_break_even(report, report["break_even_utilization"]))
    if "reserved_price_per_h" in report:
        _render_reserved(report, console)


def _break_even(report: dict, share: float) -> str:
    verdict = "never (above 100 %)" if share > 1 else f"{share:.1%}"
    inputs = f" + ${report['api_input_price_per_million']:g} input" \
        if "api_input_price_per_million" in report else ""
    return (f"break-even vs API at ${report['api_price_per_million']:g}/million{inputs}: "
            f"utilization {verdict}")


def _render_reserved(report: dict, console: Console) -> None:
    console.print(f"reserved at ${report['reserved_price_per_h']:g}/GPU-hour: "
                  f"${report['reserved_usd_per_million_full_load']:,.2f} per million at full "
                  f"load, ${report['reserved_usd_per_million_at_utilization']:,.2f} at "
                  f"{report['utilization']:.0%}")
    console.print(f"reserving beats on-demand released when idle above "
                  f"{report['reserved_pays_above_utilization']:.0%} of the hours in use")
    if "reserved_break_even_utilization" in report:
        console.print("reserved " + _break_even(report,
                                                report["reserved_break_even_utilization"]))


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(cost))
