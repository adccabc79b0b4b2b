"""The option groups `servecap load` takes, declared once, each in its --help panel (the
flag names are load's contract); load receives one value per group."""

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from servecap.scenario.spec import DEFAULT

from . import sim_options as o

Opt = typer.Option
Wkl = functools.partial(Opt, rich_help_panel="Workload")
Prm = functools.partial(Opt, rich_help_panel="Prompts and conversations")
Plan = functools.partial(Opt, rich_help_panel="Against the plan")


@dataclass(frozen=True)
class LoadTraffic:
    """What is sent: the workload, its rate and count, how long."""

    workload: Annotated[Path | None, Wkl(help="Workload YAML, as `simulate` reads it.")] = None
    trace: Annotated[Path | None, Wkl(help="CSV trace arrival_s,prompt_tokens,output_tokens "
                                           "(replayed at its timestamps).")] = None
    rate: Annotated[float | None, Wkl("--rate", "--request-rate",
                                      help="Arrivals at this many requests/s instead of the "
                                      "workload's (Poisson; a gamma workload keeps its CV, "
                                      "as simulate draws them).")] = None
    input_len: Annotated[int | None, Wkl(help="A fixed shape instead of --workload/--trace: "
                                              "every prompt this many tokens (with "
                                              "--output-len).")] = None
    output_len: Annotated[int | None, Wkl(help="... and every output this many tokens.")] = None
    concurrency: Annotated[int | None, Wkl(help="Closed loop: keep N requests in flight "
                                                "(arrival times ignored).")] = None
    num_requests: Annotated[int | None, Wkl("--num-requests", "--num-prompts",
                                            help="Send this many requests (a workload is "
                                            "drawn with this count; a trace is cut).")] = None
    duration: Annotated[str | None, Wkl(help="Start no request after this (120s, 2min).")] = None
    timeout: Annotated[str, Wkl(help="A request not finished within this is a "
                                     "timeout.")] = DEFAULT.client.timeout


@dataclass(frozen=True)
class LoadPrompts:
    """How requests are written: endpoint, text, conversations."""

    endpoint: Annotated[str, Prm(help="completions (/v1/completions) or chat "
                                      "(/v1/chat/completions, messages).")] = \
        DEFAULT.client.endpoint
    dataset: Annotated[Path | None, Prm(help="JSONL of conversations sent as text: ShareGPT, "
                                             '{"prompt", "output_tokens"} or OpenAI messages '
                                             "(with --rate or --concurrency).")] = None
    tokenizer: Annotated[str | None, Prm(help="The server's tokenizer (folder, tokenizer.json "
                                              "or a Hub id in the local cache): prompts are text "
                                              "of each request's length, counted and checked "
                                              "against the server's usage.")] = None
    output_tokens: Annotated[int | None, Prm(help="Output length of a dataset turn that "
                                                  "gives none.")] = None
    turns: Annotated[int | None, Prm(help="Turns per conversation: each sends the history "
                                          "and the previous answer (default 1; a dataset: all "
                                          "its turns).")] = None
    think_time: Annotated[str, Prm(help="Pause between an answer and the next "
                                        "turn.")] = DEFAULT.client.think_time
    shared_prefix: Annotated[int, Prm(help="A system prompt of this many tokens shared by "
                                           "every conversation.")] = DEFAULT.load.shared_prefix
    vocab_size: Annotated[int, Prm(help="Prompt token ids are drawn from "
                                        "[0, N).")] = DEFAULT.client.vocab_size
    seed: Annotated[int, Prm(help="Seed of the prompt token ids (and of a dataset's --rate "
                                  "arrivals; a workload's draws are its own "
                                  "seed's).")] = DEFAULT.client.seed


@dataclass(frozen=True)
class LoadSlo:
    """The SLOs a run is judged by, and the capacity sweep."""

    slo_ttft: o.SloTtft = None
    slo_tpot: o.SloItl = None
    slo_e2e: o.SloE2e = None
    target: Annotated[float, o.Slo(help="SLO attainment (share of requests) a rate must reach "
                                        "to meet the SLOs.")] = DEFAULT.slo.target
    sweep: Annotated[bool, o.Slo(help="The server's SLO capacity: --workload at doubling "
                                      "rates, then bisected; each step --num-requests requests, "
                                      "none started after --duration.")] = False
    sweep_tolerance: Annotated[float, o.Slo(help="Bisect the capacity to this share of "
                                                 "itself.")] = DEFAULT.client.sweep_tolerance


@dataclass(frozen=True)
class LoadAgainst:
    """The run against the plan: the simulation, the server's /metrics, NVML."""

    compare_simulate: Annotated[bool, Plan(help="Simulate the same arrivals and report "
                                                "simulated vs measured per metric.")] = False
    sim_model: Annotated[str | None, Plan(help="servecap model for --compare-simulate "
                                               "(default: --model).")] = None
    plan_device: Annotated[str | None, Plan(help="Catalog device the simulation prices "
                                                 "iterations on (h100-80gb).")] = None
    coefficients: Annotated[Path | None, Plan(help="Measured coefficients JSON for the "
                                                   "simulation (servecap verify "
                                                   "--calibration-out).")] = None
    metrics: Annotated[str | None, Plan(help="Scrape this Prometheus URL during the run "
                                             "(running, waiting, KV usage).")] = None
    nvml: Annotated[int | None, Plan(help="Sample this GPU's memory (NVML index) during the "
                                          "run, when the server runs on this machine.")] = None
    calibration_out: Annotated[Path | None, Plan(help="Write the simulator's step-model fit of "
                                                      "the server's steps (reconstructed from the "
                                                      "token stream) for simulate --coefficients; "
                                                      "needs --plan-device. With --metrics, the "
                                                      "server's time outside the step too "
                                                      "(frontend_s, cpu_step_s).")] = None
