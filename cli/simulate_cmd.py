"""`servecap simulate`: run scheduler policies over a workload on the ledger-sized KV pool."""

import json
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.errors import SpecError
from servecap.ledger.units import plural
from servecap.scenario import simulation, steps
from servecap.scenario.spec import Scenario
from servecap.sim.columns import RequestColumns
from servecap.sim.deploy import run_deployment
from servecap.sim.gcpause import paused
from servecap.sim.model_error import prediction_interval
from servecap.sim.records import (
    RECORD_COLUMNS,
    TOKEN_COLUMNS,
    by_prompt_bucket,
    by_tenant,
    kv_occupancy,
    per_replica,
    records,
    tail,
    token_rows,
)

from . import sim_options as o
from .errors import handle_errors
from .files import check_output_files, refuse_inputs, write_csv
from .option_groups import options_from
from .scenario_opts import SaveScenario, ScenarioFile, merged, save
from .sim_inputs import SIM_PATHS, Setup, SimFlags, batch_in_effect, sim_flags, sim_scenario
from .simulate_header import header


@options_from(o.SimOptions, "opts", after="model")
def simulate(ctx: typer.Context, model: o.OptionalModel = None, trace: o.Trace = None,
             policy: o.Policy = None, rate: o.Rate = None,
             num_requests: o.SimNumRequests = None, as_json: o.Json = False,
             records_path: Annotated[Path | None, typer.Option(
                 "--records", help="Write one CSV row per request and policy (every "
                 "timestamp).", rich_help_panel=o.OUTPUT)] = None,
             token_times_path: Annotated[Path | None, typer.Option(
                 "--token-times", help="Write one CSV row per generated token (its ready "
                 "time and the gap before it).", rich_help_panel=o.OUTPUT)] = None,
             xlsx: o.Xlsx = None, force: o.Force = False, verbose: o.Verbose = False,
             scenario_file: ScenarioFile = None, save_scenario: SaveScenario = None,
             opts: o.SimOptions = o.NO_SIM_OPTIONS) -> None:
    """Simulate the scheduler over a workload: latency percentiles, throughput, goodput.

    The KV pool is what the memory ledger leaves after weights, runtime peak and safety;
    iteration time is the printed roofline (override any coefficient with --coefficients).
    Figures are measured over the steady-state window (warm-up and drain excluded), with
    95 % intervals; a run that never reaches steady state is measured whole and says so.

    Examples:

      servecap simulate llama-3.1-8b --device h100-80gb --workload workloads/chat.yaml \\
          --policy static --policy continuous --slo-ttft 500ms --slo-itl 50ms
      servecap simulate llama-3.1-8b --device h100-80gb --input-len 1024 \\
          --output-len 128 --rate 8 --num-requests 2000
      servecap simulate llama-3.1-8b --device 80GiB --bandwidth 2000GB/s --flops 990TFLOPS \\
          --trace requests.csv --json

    Workload and trace formats: workloads/README.md; the JSON contract: docs/simulate.md.
    """
    policies = policy or (default_policy(opts.engine, opts.speed_of_light, opts.coefficients),)
    flags = SimFlags(**opts.values(), trace=trace, policies=tuple(policies), rate=rate,
                     num_requests=num_requests)
    origins: dict[str, str] = {}
    scenario = merged(ctx, sim_scenario(model, flags, opts.seeds), SIM_PATHS, scenario_file,
                      verbose, origins=origins)
    check_outputs(scenario, records_path, token_times_path, xlsx, force)
    setup = simulation.setup(scenario)
    if verbose:
        from .plan_cmd import print_fetch_report

        print_fetch_report(setup.hub)
    report, outcomes = run_simulation(setup, num_seeds=scenario.simulator.seeds)
    write_files(outcomes, records_path, token_times_path)
    save(scenario, save_scenario, setup.plan, batch_in_effect(setup), engine=setup.engine)
    if xlsx is not None:  # with --disaggregate, the disaggregated run (listed last)
        from .sim_xlsx import write_simulated_workbook
        from .workbook_scenario import Recording

        write_simulated_workbook(scenario.model.ref, sim_flags(scenario), setup,
                                 report["policies"][-1], xlsx, force,
                                 plural(report['num_requests'], 'request'),
                                 Recording(scenario, origins))
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        from rich.console import Console

        from .sim_view import render_simulation

        render_simulation(report, Console())


def default_policy(engine: str | None, speed_of_light: bool = False,
                   coefficients: object = None) -> str:
    """The simulated release's own scheduler (scenario/steps.py default_policy): V1, the
    default's, chunks prefills; V0 runs whole prompts first; plain: continuous."""
    return steps.default_policy(steps.simulated_row(engine, speed_of_light, coefficients))


def run_simulation(setup: Setup, window: bool = True, num_seeds: int = 1) -> tuple[dict, list]:
    """Every policy over the same requests on the deployment; the report every output is
    rendered from, and the outcomes the records come from. window=False measures every
    request rather than the steady-state window."""
    outcomes, policies = [], []
    with paused():  # the runs and their reports (sim/gcpause.py)
        for cfg in setup.configs:
            for outcome in run_deployment(setup.requests, setup.coefficients, cfg,
                                          setup.num_blocks, setup.deployment, setup.slo,
                                          num_seeds, window):
                outcomes.append((cfg.policy, outcome))
                policies.append(_entry(setup, outcome))
    return header(setup) | {"policies": policies}, outcomes


def _entry(setup: Setup, outcome) -> dict:
    results = outcome.results
    columns = outcome.columns if outcome.columns is not None else \
        RequestColumns(outcome.seqs)  # tail and buckets read each request once
    entry = outcome.summary | {"deployment": outcome.deployment,
                               "tail": tail(outcome.seqs, columns=columns)}
    entry["prediction_interval"] = prediction_interval(
        entry, (setup.engine or {}).get("simulated"))
    entry["kv"] = kv_occupancy(results[0]) if len(results) == 1 else \
        {"replicas": [kv_occupancy(r) for r in results]}
    if len(results) > 1:
        entry["replicas"] = per_replica(results)
    if any(s.req.tenant for s in outcome.seqs):
        entry["tenants"] = by_tenant(outcome.seqs, setup.slo)
    if setup.workload is not None and setup.workload.buckets_tokens:
        entry["buckets"] = by_prompt_bucket(outcome.seqs, setup.workload.buckets_tokens,
                                            columns)
    return entry


def write_files(outcomes: list, records_path: Path | None,
                token_times_path: Path | None) -> None:
    if records_path is not None:
        write_csv(records_path, RECORD_COLUMNS, (
            row for policy, out in outcomes for row in records(policy, out.deployment,
                                                               out.seqs)), "--records")
    if token_times_path is not None:
        write_csv(token_times_path, TOKEN_COLUMNS, (
            row for policy, out in outcomes
            for row in token_rows(policy, out.deployment, out.results, out.seqs)),
            "--token-times")


def check_outputs(scenario: Scenario, records_path: Path | None,
                  token_times_path: Path | None, xlsx: Path | None, force: bool) -> None:
    """Every output file must be writable, and none may be an input, before anything is
    simulated."""
    inputs = tuple(None if p is None else Path(p) for p in (
        scenario.workload.file, scenario.workload.trace, scenario.simulator.coefficients))
    refuse_inputs({"--records": records_path, "--token-times": token_times_path,
                   "--xlsx": xlsx}, inputs)
    check_output_files({"--records": records_path, "--token-times": token_times_path}, inputs,
                       force)
    if xlsx is not None:
        policies = scenario.simulator.policies
        if len(policies) > 1:
            raise SpecError("--xlsx", ", ".join(policies), "the Latency record holds "
                            "one run: give one --policy")
        from .sim_xlsx import check_target

        check_target(xlsx, force)


def register(app: typer.Typer) -> None:
    """simulate alone: sweep, cost and speculate register from their own modules, so a
    simulation imports none of their options, tables and progress bars."""
    app.command()(handle_errors(simulate))
