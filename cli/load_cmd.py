"""`servecap load`: drive any OpenAI-compatible endpoint with a workload or trace; measure it."""

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.errors import SpecError
from servecap.sim.workload import Arrivals

from . import load_compare
from .errors import handle_errors
from .load_view import progress_bar, render_load
from .sim_inputs import SimFlags, load_requests, load_workload, parse_duration
from .simulate_cmd import check_writable, write_csv

Opt = typer.Option


def load(
    base_url: Annotated[str, typer.Argument(help="The server's OpenAI base URL, e.g. "
                                            "http://localhost:8000/v1")],
    model: Annotated[str, Opt(help="The `model` to send (as the server names it).")],
    workload: Annotated[Path | None, Opt(help="Workload YAML, as `simulate` reads it.")] = None,
    trace: Annotated[Path | None, Opt(help="CSV trace arrival_s,prompt_tokens,output_tokens "
                                      "(replayed at its timestamps).")] = None,
    rate: Annotated[float | None, Opt(help="Poisson arrivals at this many requests/s instead "
                                      "of the workload's arrival process.")] = None,
    concurrency: Annotated[int | None, Opt(help="Closed loop: keep N requests in flight "
                                           "(arrival times ignored).")] = None,
    duration: Annotated[str | None, Opt(help="Start no request after this (120s, 2min).")]
    = None,
    num_requests: Annotated[int | None, Opt(help="Send this many requests (a workload is "
                                            "drawn with this count; a trace is cut).")] = None,
    timeout: Annotated[str, Opt(help="A request not finished within this is a timeout.")]
    = "600s",
    vocab_size: Annotated[int, Opt(help="Prompt token ids are drawn from [0, N).")] = 256,
    seed: Annotated[int, Opt(help="Seed of the prompt token ids (and of --rate arrivals).")]
    = 0,
    records_path: Annotated[Path | None, Opt("--records", help="Per-request CSV (the "
                                             "simulate --records columns).")] = None,
    token_times_path: Annotated[Path | None, Opt("--token-times", help="Per-token CSV (the "
                                                 "simulate --token-times columns).")] = None,
    metrics: Annotated[str | None, Opt(help="Scrape this Prometheus URL during the run "
                                       "(running, waiting, KV usage).")] = None,
    compare_simulate: Annotated[bool, Opt(help="Simulate the same arrivals and report "
                                          "simulated vs measured per metric.")] = False,
    sim_model: Annotated[str | None, Opt(help="servecap model for --compare-simulate "
                                         "(default: --model).")] = None,
    plan_device: Annotated[str | None, Opt(help="Catalog device the simulation prices "
                                           "iterations on (h100-80gb).")] = None,
    coefficients: Annotated[Path | None, Opt(help="Measured coefficients JSON for the "
                                             "simulation (servecap verify "
                                             "--calibration-out).")] = None,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object.")] = False,
) -> None:
    """Send a workload to an OpenAI-compatible server; report TTFT/ITL/TPOT/E2E as simulate does.

    Prompts are token ids of each request's length (completions endpoint); max_tokens,
    min_tokens and ignore_eos make output lengths exact (docs/serve.md). Examples:

      servecap load http://localhost:8000/v1 --model tiny-llama --workload workloads/chat.yaml
      servecap load http://gpu:8000/v1 --model m --trace prod.csv --concurrency 32 --json
    """
    from servecap.load.report import (
        RECORD_COLUMNS,
        TOKEN_COLUMNS,
        measured_seqs,
        record_rows,
        summarize,
        token_time_rows,
    )
    from servecap.load.runner import LoadSpec, run_scraped
    from servecap.load.scrape import Scraper

    for path, field in ((records_path, "--records"), (token_times_path, "--token-times")):
        if path is not None:
            check_writable(path, field)
    requests, source = _requests(workload, trace, rate, num_requests, seed)
    spec = LoadSpec(base_url.rstrip("/") + "/completions", model, tuple(requests),
                    _positive(concurrency, "--concurrency"),
                    duration and parse_duration(duration, "--duration"),
                    parse_duration(timeout, "--timeout"), _positive(vocab_size, "--vocab-size"),
                    seed)
    scraper = Scraper(metrics) if metrics else None
    with progress_bar(len(requests), as_json) as on_done:
        sent, start = asyncio.run(run_scraped(spec, scraper, on_done))
    seqs = measured_seqs(sent, start)
    report = {"base_url": base_url, "model": model, "source": source,
              "mode": "open loop" if concurrency is None else f"closed loop ({concurrency})",
              **summarize(sent, seqs, start)}
    if scraper is not None:
        report["server_metrics"] = scraper.summary()
    if compare_simulate:
        report["compare_simulate"] = load_compare.compare_simulate(
            sim_model or model, plan_device, coefficients, seqs, report)
    if records_path is not None:
        write_csv(records_path, RECORD_COLUMNS, record_rows(seqs, base_url))
    if token_times_path is not None:
        write_csv(token_times_path, TOKEN_COLUMNS, token_time_rows(seqs, base_url),
                  "--token-times")
    print(json.dumps(report, indent=2)) if as_json else render_load(report, Console())


def _requests(workload: Path | None, trace: Path | None, rate: float | None,
              num_requests: int | None, seed: int) -> tuple[list, str]:
    """The simulator's draws from the workload (with --rate / --num-requests applied) or
    the trace's rows; each request keeps its id so records line up with the input."""
    if workload is not None and trace is None:
        spec = load_workload(workload)
        if rate is not None:
            if rate <= 0:
                raise SpecError("--rate", rate, "requests/s > 0")
            spec = replace(spec, arrivals=Arrivals("poisson", rate_per_s=rate))
        if num_requests is not None:
            spec = replace(spec, num_requests=_positive(num_requests, "--num-requests"))
        from servecap.sim.sampling import draw_requests

        return draw_requests(spec), str(workload)
    if rate is not None:
        raise SpecError("--rate", rate, "a trace replays its own timestamps; --rate goes "
                        "with --workload")
    requests, _, source = load_requests(SimFlags(workload=workload, trace=trace))
    if num_requests is not None:
        requests = requests[:_positive(num_requests, "--num-requests")]
    return requests, source


def _positive(value: int | None, field: str) -> int | None:
    if value is not None and value < 1:
        raise SpecError(field, value, "must be >= 1")
    return value


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(load))
