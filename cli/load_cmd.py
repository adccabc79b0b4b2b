"""`servecap load`: drive any OpenAI-compatible endpoint with a workload or trace; measure it."""

import asyncio
import contextlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.errors import SpecError
from servecap.ledger.units import plural
from servecap.scenario.spec import Scenario, with_values
from servecap.scenario.values import parse_duration, slo_target
from servecap.scenario.values import slo as scenario_slo
from servecap.scenario.workload import load_workload
from servecap.scenario.workload import requests as scenario_requests

from . import load_calibrate, load_compare
from .errors import EXIT_DOES_NOT_FIT, EXIT_INTERRUPTED, fail, handle_errors
from .extras import CLIENT, need
from .files import check_output_files, write_csv
from .load_inputs import LOAD_PATHS, PromptFlags, from_dataset, from_requests, prompter
from .load_options import LoadAgainst, LoadPrompts, LoadSlo, LoadTraffic
from .load_view import progress_bar, render_load
from .option_groups import options_from
from .scenario_opts import SaveScenario, ScenarioFile, from_flags, merged, save
from .sim_xlsx import check_target

Opt = typer.Option


@options_from(LoadPrompts, "prompts", after="save_scenario")
@options_from(LoadSlo, "slos", after="save_scenario")
@options_from(LoadAgainst, "against", after="save_scenario")
@options_from(LoadTraffic, "traffic", after="base_url")
def load(
    ctx: typer.Context,
    base_url: Annotated[str, typer.Argument(help="The server's OpenAI base URL, e.g. "
                                            "http://localhost:8000/v1")],
    model: Annotated[str | None, Opt(help="The `model` to send (as the server names it; "
                                      "default: the only model its /v1/models lists).")]
    = None,
    records_path: Annotated[Path | None, Opt("--records", help="Per-request CSV (the "
                                             "simulate --records columns).")] = None,
    token_times_path: Annotated[Path | None, Opt("--token-times", help="Per-token CSV (the "
                                                 "simulate --token-times columns).")] = None,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object.")] = False,
    force: Annotated[bool, Opt(help="Replace an existing --records or --token-times file.")]
    = False,
    xlsx: Annotated[Path | None, Opt(help="With --sweep: a workbook of the sweep, with "
                                     "sweep's latency chart.")] = None,
    verbose: Annotated[bool, Opt("--verbose", "-v", help="Say which flags replaced the "
                                 "--scenario file's fields (stderr).")] = False,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    traffic: LoadTraffic = None,
    prompts: LoadPrompts = None,
    slos: LoadSlo = None,
    against: LoadAgainst = None,
) -> None:
    """Send a workload to an OpenAI-compatible server; report TTFT/ITL/TPOT/E2E as simulate does.

    Prompts are token ids of each request's length (completions endpoint), or text with
    --tokenizer / --dataset, as chat messages with --endpoint chat; max_tokens, min_tokens
    and ignore_eos make output lengths exact (docs/serve.md, docs/load.md). Examples:

      servecap load http://localhost:8000/v1 --workload workloads/chat.yaml
      servecap load http://gpu:8000/v1 --model m --trace prod.csv --concurrency 32 --json
      servecap load http://gpu:8000/v1 --endpoint chat --dataset sharegpt.jsonl \
          --tokenizer meta-llama/Llama-3.1-8B-Instruct --rate 4 --turns 3 --think-time 2s
      servecap load http://gpu:8000/v1 --workload workloads/chat.yaml --sweep \
          --slo-ttft 500ms --slo-tpot 50ms --num-requests 300 --duration 60s

    Exit 0 when at least one request completed (failures are counted in the report by kind:
    http_error, timeout, connection_error, stream_error, bad_json, bad_schema, bad_encoding,
    bad_sse, bad_response), 1 when none did, 2 on bad input, 130 when interrupted (the
    report and records of what finished are still written).
    """
    need("load", CLIENT)
    metrics, nvml, compare_simulate = against.metrics, against.nvml, against.compare_simulate
    calibration_out = against.calibration_out
    scenario = merged(ctx, from_flags(ctx.params, LOAD_PATHS), LOAD_PATHS, scenario_file,
                      verbose)
    c, w, srv = scenario.client, scenario.workload, scenario.server
    workload, trace, dataset = _path(w.file), _path(w.trace), _path(c.dataset)
    rate, concurrency, num_requests = w.rate, w.max_concurrency, w.num_requests
    coefficients, plan_device, model = _path(scenario.simulator.coefficients), \
        scenario.device.name, srv.served_model_name
    check_output_files({"--records": records_path, "--token-times": token_times_path,
                        "--calibration-out": calibration_out},
                       (workload, trace, coefficients), force)
    flags = PromptFlags(c.endpoint, dataset, srv.tokenizer, c.turns, scenario.load.shared_prefix,
                        c.output_tokens, _positive(c.vocab_size, "--vocab-size"), c.seed)
    if dataset is not None and (workload or trace or w.input_len or w.output_len):
        raise SpecError("--dataset", str(dataset), "a dataset replaces --workload/--trace")
    requests, source = _requests(scenario) if dataset is None else ([], str(dataset))
    if c.sweep:
        _check_sweep(workload, dataset, c.sweep_tolerance)
    if metrics is not None:
        http_url(metrics, "--metrics", "http://localhost:8000/metrics")
    http_url(base_url, "base_url", "http://localhost:8000/v1")
    ask = prompter(flags, model or "")  # bad flags fail before the server is asked
    model = model or _only_model(base_url)
    ask = replace(ask, model=model)
    convs = from_requests(requests, flags) if dataset is None else \
        from_dataset(flags, ask.tokenizer, rate, concurrency, num_requests)
    spec = _spec(base_url, ask, convs, concurrency, c.duration, c.timeout,
                 parse_duration(c.think_time, "--think-time"))
    slo = scenario_slo(scenario)
    target = slo_target(scenario.slo.target)
    sim = with_values(scenario, {"model.name": scenario.model.name or model})
    if c.sweep:
        save(scenario, save_scenario, in_effect={"server.served_model_name": model})
        return _sweep(base_url, model, source, flags, ask, workload, num_requests, c.duration,
                      c.timeout, c.think_time, slo, target, c.sweep_tolerance, as_json, xlsx,
                      force)
    requests = [r for c in convs for r in c.requests]
    if compare_simulate or (metrics and plan_device):
        load_compare.check(sim, compare_simulate)
    if calibration_out is not None:
        load_calibrate.check(sim)
    save(scenario, save_scenario, in_effect={"server.served_model_name": model})
    report, seqs = _measure(spec, metrics, nvml, as_json, slo)
    if any(t is not None for t in (slo.ttft_s, slo.itl_s, slo.e2e_s)):
        from servecap.sim.capacity import meets, verdict

        report["slo_target_attainment"] = target
        report["slo_meets"] = meets(report["window"], target)  # the point estimate
        report["slo_verdict"] = verdict(report["window"], target)  # with its interval
    _write_csvs(seqs, base_url, records_path, token_times_path)  # always, even interrupted
    report = {"base_url": base_url, "model": model, "source": source,
              "mode": "open loop" if concurrency is None else f"closed loop ({concurrency})",
              "not_sent": len(requests) - report["offered"], **report}
    if metrics and plan_device:
        report["kv_vs_ledger"] = load_compare.kv_against_ledger(
            sim, report["server_metrics"], seqs)
    if calibration_out is not None and report["completed"]:
        report["calibration"] = load_calibrate.write_calibration(
            calibration_out, sim, seqs, force, report.get("server_metrics"))
    if compare_simulate:
        report["compare_simulate"] = load_compare.compare_simulate(sim, seqs, report)
    print(json.dumps(report, indent=2)) if as_json else render_load(report, Console())
    if report["interrupted"]:
        raise fail(f"interrupted: {plural(report['offered'], 'request')} finished (reported "
                   "above)",
                   EXIT_INTERRUPTED)
    if not report["completed"]:
        raise fail(f"no request completed ({report['failed']} failed)", EXIT_DOES_NOT_FIT)


def http_url(text: str, field: str, example: str) -> None:
    """An http(s)://host URL, else bad input (exit 2) rather than a run whose every request
    or scrape fails."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(field, text, f"an http:// or https:// URL, e.g. {example}")


def _only_model(base_url: str) -> str:
    from servecap.load.models import only_model

    return only_model(base_url)


def _spec(base_url, ask, convs, concurrency, duration, timeout, think_s):
    from servecap.load.runner import LoadSpec

    path = "/chat/completions" if ask.endpoint == "chat" else "/completions"
    return LoadSpec(base_url.rstrip("/") + path, ask, convs,
                    _positive(concurrency, "--concurrency"),
                    duration and parse_duration(duration, "--duration"),
                    parse_duration(timeout, "--timeout"), think_s)


def _sweep(base_url, model, source, flags, ask, workload, num_requests, duration, timeout,
           think_time, slo, target, tolerance, as_json, xlsx, force) -> None:
    """load --sweep: the capacity search over bounded runs of the workload (cli/load_sweep)."""
    from .load_sweep import check_plan, report_sweep, run_sweep

    if xlsx is not None:
        check_target(xlsx, force)
    plan = check_plan(load_workload(workload), _positive(num_requests, "--num-requests"),
                      duration and parse_duration(duration, "--duration"), slo, target,
                      tolerance)
    think = parse_duration(think_time, "--think-time")

    def make_spec(convs, concurrency, duration_s):
        return replace(_spec(base_url, ask, convs, concurrency, None, timeout, think),
                       duration_s=duration_s)

    found = run_sweep(plan, make_spec, flags, as_json)
    report = {"base_url": base_url, "model": model, "source": source,
              "slo_text": _slo_text(slo), "slo_ms": _slo_ms(slo),
              "requests_per_step": plan.num_requests, "step_duration_s": plan.duration_s,
              **found}
    report_sweep(report, as_json, xlsx, force)
    if not found["capacity_rps"]:
        raise fail("no rate met the SLO target (reported above)", EXIT_DOES_NOT_FIT)


def _check_sweep(workload: Path | None, dataset: Path | None, tolerance: float) -> None:
    if workload is None or dataset is not None:
        raise SpecError("--workload", None, "--sweep draws its requests from a workload YAML "
                        "at each rate")
    if not 0 < tolerance < 1:
        raise SpecError("--sweep-tolerance", tolerance, "a share in (0, 1), e.g. 0.1")


def _slo_ms(slo) -> dict:
    def ms(value):
        return None if value is None else value * 1000
    return {"ttft_ms": ms(slo.ttft_s), "tpot_ms": ms(slo.itl_s), "e2e_ms": ms(slo.e2e_s)}


def _slo_text(slo) -> str:
    parts = [f"{name} <= {value:g} ms" for name, value in
             zip(("TTFT", "TPOT", "e2e"), _slo_ms(slo).values(), strict=True)
             if value is not None]
    return ", ".join(parts) or "no latency target"


def _measure(spec, metrics: str | None, nvml: int | None, quiet: bool,
             slo=None) -> tuple[dict, list]:
    """Run the load (with the /metrics scraper and NVML sampler when asked); the summary
    and the measured requests as simulator records."""
    from servecap.load.report import measured_seqs, summarize
    from servecap.load.runner import RunState, run_scraped
    from servecap.load.scrape import Scraper
    from servecap.load.steady import kv_samples

    scraper = Scraper(metrics) if metrics else None
    state, interrupted = RunState(), False
    with _nvml(nvml) as sampler, progress_bar(spec.num_requests, quiet) as on_done:
        try:
            sent, start = asyncio.run(run_scraped(spec, scraper, on_done, state))
        except KeyboardInterrupt:  # Ctrl-C: report and write what finished
            sent, start, interrupted = state.finished, state.start_s, True
    seqs = measured_seqs(sent, start)
    report = summarize(sent, seqs, start) | {"interrupted": interrupted}
    report |= _steady(seqs, kv_samples(scraper, start), slo)
    if scraper is not None:
        report["server_metrics"] = scraper.summary()
    if sampler is not None:
        report["nvml"] = sampler.summary()
    return report, seqs


def _steady(seqs: list, kv: list, slo=None) -> dict:
    """steady_state (bool), its reason, and `window`: the simulator's measured window of the
    run (warm-up and drain cut) with 95 % intervals (load/steady.py)."""
    from servecap.load.steady import steady_window

    window = steady_window(seqs, kv, slo)
    return {"steady_state": window.pop("steady_state"),
            "steady_state_reason": window.pop("steady_state_reason"), "window": window}


def _nvml(index: int | None):
    if index is None:
        return contextlib.nullcontext()
    from servecap.runtime.nvml_sampler import NvmlSampler

    return NvmlSampler(index)


def _write_csvs(seqs: list, base_url: str, records_path: Path | None,
                token_times_path: Path | None) -> None:
    from servecap.load.report import RECORD_COLUMNS, TOKEN_COLUMNS, record_rows, token_time_rows

    if records_path is not None:
        write_csv(records_path, RECORD_COLUMNS, record_rows(seqs, base_url))
    if token_times_path is not None:
        write_csv(token_times_path, TOKEN_COLUMNS, token_time_rows(seqs, base_url),
                  "--token-times")


def _requests(scenario: Scenario) -> tuple[list, str]:
    """The simulator's draws from the workload (its rate and num_requests replaced where the
    scenario gives them) or a fixed shape, or the trace's rows (the first num_requests); each
    request keeps its id so records line up with the input."""
    w = scenario.workload
    if w.trace is None or w.file is not None or w.input_len or w.output_len:
        if w.rate is not None and w.rate <= 0:
            raise SpecError("--rate", w.rate, "requests/s > 0")
        _positive(w.num_requests, "--num-requests")
        requests, _, source = scenario_requests(scenario)
        return requests, source
    if w.rate is not None:
        raise SpecError("--rate", w.rate, "a trace replays its own timestamps; --rate goes "
                        "with --workload")
    requests, _, source = scenario_requests(with_values(scenario, {"workload.num_requests":
                                                                   None}))
    if w.num_requests is not None:
        requests = requests[:_positive(w.num_requests, "--num-requests")]
    return requests, source


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def _positive(value: int | None, field: str) -> int | None:
    if value is not None and value < 1:
        raise SpecError(field, value, "must be >= 1")
    return value


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(load))
