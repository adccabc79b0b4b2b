"""`servecap speculate`: speculative decoding's speedup by batch size, on the step model."""

import functools
import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from servecap.ledger.errors import SpecError
from servecap.ledger.units import GiB, fmt_gib, plural
from servecap.scenario import simulation, steps
from servecap.scenario.spec import DEFAULT as D
from servecap.sim.speculative import (
    Speculation,
    batches_within,
    break_even_batch,
    ceiling_with_draft,
    compare,
    expected_tokens_per_step,
)

from . import sim_options as o
from .errors import handle_errors
from .narrow import print_table
from .option_groups import options_from
from .scenario_opts import SaveScenario, ScenarioFile, merged, save
from .sim_inputs import (
    SIM_PATHS,
    SimFlags,
    device_coefficients,
    draft_plan,
    rank_for,
    sim_flags,
    sim_scenario,
)

Compared = functools.partial(typer.Option, rich_help_panel="Compared")
SPECULATE_PATHS = {name: SIM_PATHS[name] for name in (
    "model", "device", "bandwidth", "flops", "step_overhead", "draft", "draft_length",
    "acceptance", "context", "tensor_parallel_size", "pipeline_parallel_size",
    "speed_of_light", "engine")}


@options_from(o.RooflineOptions, "rig", after="draft")
def speculate(ctx: typer.Context, model: o.OptionalModel = None,
              draft: Annotated[str | None, o.Spc(help="Draft model (bundled name or file); "
                                                 "required unless --scenario gives it.")]
              = None,
              draft_length: Annotated[int, o.Spc(help="Draft tokens per step (k).")]
              = D.speculative.num_speculative_tokens,
              acceptance: Annotated[float, o.Spc(help="Probability each draft token is "
                                                 "accepted (a).")] = D.speculative.acceptance,
              context: Annotated[int, Compared("--context", "--max-model-len",
                                               help="Tokens of context per sequence.")] = 1024,
              batches: Annotated[str, Compared(help="Batch sizes to compare.")]
              = "1,2,4,8,16,32,64,128,256,512",
              as_json: o.Json = False, scenario_file: ScenarioFile = None,
              save_scenario: SaveScenario = None,
              rig: o.RooflineOptions = o.NO_ROOFLINE) -> None:
    """Where speculative decoding helps (low batch, memory-bound) and where it stops.

    Speedup per batch size on simulate's step model (by default with the newest vLLM
    release's host time per step; --engine plain: the roofline and efficiency tables
    alone), for --draft-length tokens accepted each with probability --acceptance, at
    batches up to the memory-only ceiling with the draft's weights and KV counted beside
    the target's. Example:

      servecap speculate llama-3.1-8b --device h100-80gb --draft llama-3.2-1b-instruct
    """
    flags = SimFlags(**asdict(rig), context=context, draft=draft, draft_length=draft_length,
                     acceptance=acceptance)
    scenario = merged(ctx, sim_scenario(model, flags), SPECULATE_PATHS, scenario_file)
    model, flags = scenario.model.ref, sim_flags(scenario)
    draft, draft_length, acceptance = flags.draft, flags.draft_length, flags.acceptance
    if draft is None:
        raise SpecError("--draft", None, "required: the draft model (or give it in "
                        "--scenario FILE)")
    if flags.context is not None and flags.context < 1:
        raise SpecError("--context", flags.context, "tokens of context per sequence, >= 1")
    target, drafted = rank_for(model, flags), draft_plan(draft, flags)
    context = target.plan.serve.context_tokens  # the scenario's, else the model's
    memory = ceiling_with_draft(target.plan, drafted.plan)
    _room_for_one(target.plan, memory, scenario.device.name or target.plan.serve.device_label,
                  flags.tensor_parallel_size * flags.pipeline_parallel_size > 1)
    compared, beyond = batches_within(_batches(batches), memory["memory_ceiling_requests"])
    # the draft runs inside the target's engine step: the release's host terms are the target's
    draft_coef = steps.coefficients(drafted, simulation.draft_scenario(scenario))
    spec = Speculation(draft_length, acceptance, draft_coef)
    rows = compare(device_coefficients(target, flags), spec, compared, context)
    report = {"engine": steps.scenario_engine_label(scenario),
              "expected_tokens_per_step": expected_tokens_per_step(draft_length, acceptance),
              "break_even_batch": break_even_batch(rows), "rows": rows,
              "memory": memory, "batches_beyond_ceiling": beyond}
    save(scenario, save_scenario, engine=report["engine"])
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        _render(report, Console())


def _room_for_one(plan, memory: dict, device: str, per_rank: bool) -> None:
    """Refuse, naming the device and the bytes, a device that cannot hold the target, the
    draft and one request's KV of both (the memory-only ceiling with the draft is 0): the
    load asked about is one request; it is the device that is too small."""
    if memory["memory_ceiling_requests"] >= 1:
        return
    needed = plan.fixed_bytes + memory["draft_weights_bytes"] + plan.kv_bytes_per_request + \
        memory["draft_kv_bytes_per_request"]
    raise SpecError("--device", device, f"the target, the draft and one "
                    f"{memory['context_tokens']:,}-token request do not fit (need "
                    f"{fmt_gib(needed)}{' per GPU' if per_rank else ''}; the device has "
                    f"{fmt_gib(plan.device_bytes)}): a larger device, a smaller draft or "
                    "model, or -tp")


def _render(report: dict, console: Console) -> None:
    table = Table(title=f"speculative decoding: {report['expected_tokens_per_step']:.2f} "
                  "expected tokens per verification")
    for col in ("batch", "plain tok/s/seq", "speculative tok/s/seq", "speedup"):
        table.add_column(col, justify="right")
    for r in report["rows"]:
        table.add_row(str(r["batch"]), f"{r['plain_tokens_per_s_per_seq']:,.1f}",
                      f"{r['speculative_tokens_per_s_per_seq']:,.1f}", f"{r['speedup']:.2f}x")
    print_table(console, table)
    console.print(f"engine: {report['engine']['about']}", highlight=False)
    _render_memory(report, console)
    edge = report["break_even_batch"]
    largest = max(r["batch"] for r in report["rows"])
    limit = "the memory ceiling" if report["batches_beyond_ceiling"] else \
        "the largest compared (--batches)"
    console.print(f"stops helping at batch {edge}" if edge else
                  f"still helps at batch {largest:,}, {limit}")


def _render_memory(report: dict, console: Console) -> None:
    mem = report["memory"]
    ceiling = mem["memory_ceiling_requests"]
    console.print(f"memory-only ceiling with the draft: {plural(ceiling, 'request')} of "
                  f"{mem['context_tokens']:,} tokens "
                  f"({mem['target_only_memory_ceiling_requests']:,} without)")
    console.print(f"the draft's share: weights {mem['draft_weights_bytes'] / GiB:.2f} GiB, "
                  f"KV {mem['draft_kv_bytes_per_token']:,} B per token")
    if report["batches_beyond_ceiling"]:
        beyond = ", ".join(f"{b:,}" for b in report["batches_beyond_ceiling"])
        console.print(f"not compared, beyond that ceiling: batch {beyond}")
        console.print(f"compared in their place: batch {ceiling:,}")


def _batches(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise SpecError("--batches", text, "comma-separated batch sizes >= 1, e.g. 1,8,64")
    return sorted(values)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(speculate))
