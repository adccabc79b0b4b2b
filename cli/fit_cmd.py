"""`servecap fit`: the inverse questions, answered by planning candidates with `plan`'s ledger."""

import functools
import inspect
import json
from dataclasses import fields, replace
from typing import Annotated

import typer

from servecap.ledger import fit as search
from servecap.ledger.errors import SpecError
from servecap.ledger.ranks import Parallel
from servecap.ledger.serve import MAX_CONCURRENCY

from . import plan_cmd
from .deploy import NO_DEPLOY, DeployFlags
from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .fit_words import candidate
from .inputs import PLAN_PATHS, PlanFlags, plan_flags_of, plan_scenario, serve_spec
from .plan_json import deployment_to_dict
from .scenario_opts import SaveScenario, ScenarioFile, merged, save

QUESTIONS = ("context", "concurrency", "tp", "pp", "gpus", "kv-dtype", "weight-dtype",
             "kv-offload")
PLAN_FLAGS = ("device", "context", "concurrency", "runtime_peak", "safety", "weight_dtype",
              "kv_dtype", "activation_dtype", "block_size", "shared_prefix", "group_size",
              "max_num_batched_tokens")
DEPLOY_FLAGS = tuple(f.name for f in fields(DeployFlags))
MAX_DEVICES = 64
MAX_CONTEXT_TOKENS = 2**24  # where a model states no max_position_embeddings
NO_FLAGS = PlanFlags()
ANSWER_KEYS = {"context": "max_context_tokens", "concurrency": "max_concurrency_requests",
               "tp": "min_tensor_parallel_size", "pp": "min_pipeline_parallel_size",
               "gpus": "min_num_devices", "kv-dtype": "kv_dtype", "weight-dtype": "weight_dtype",
               "kv-offload": "kv_offloading_size_gib"}
Out = functools.partial(typer.Option, rich_help_panel="Search and output")
# fit's flags that describe the scenario: plan's, and the traffic --find kv-offload reads
FIT_PATHS = PLAN_PATHS | {"workload": ("workload.file",), "trace": ("workload.trace",)}


def plan_options(command):
    """Give `command` plan's MODEL argument and plan's own option definitions (names, parsers,
    help); it receives them as `flags` (PlanFlags) and `deploy` (DeployFlags)."""
    planned = inspect.signature(plan_cmd.plan).parameters
    own = [p for p in inspect.signature(command).parameters.values()
           if p.name not in ("model", "flags", "deploy")]

    def keyword(name: str) -> inspect.Parameter:
        return planned[name].replace(kind=inspect.Parameter.KEYWORD_ONLY)

    @functools.wraps(command)
    def wrapper(model=None, **kwargs):
        flags = PlanFlags(**{name: kwargs.pop(name) for name in PLAN_FLAGS})
        deploy = DeployFlags(**{name: kwargs.pop(name) for name in DEPLOY_FLAGS})
        return command(model, flags=flags, deploy=deploy, **kwargs)

    wrapper.__signature__ = inspect.Signature(
        [planned["model"], *map(keyword, PLAN_FLAGS), *own, *map(keyword, DEPLOY_FLAGS)])
    del wrapper.__wrapped__
    wrapper.command = command  # the function as written (its own parameters)
    return wrapper


@plan_options
def fit(
    model: str | None = None,
    *,
    find: Annotated[str | None, Out(help="What to search: context, concurrency, tp, pp, gpus, "
                                    "kv-dtype, weight-dtype, kv-offload (the host tier a "
                                    "--hit-rate needs on a --workload or --trace). Default: "
                                    "context when only --concurrency is given, else "
                                    "concurrency.")] = None,
    hit_rate: Annotated[float | None, Out(help="--find kv-offload: the share of offered "
                                          "prefix tokens the host tier should serve, e.g. "
                                          "0.9.")] = None,
    workload: Annotated[str | None, Out(help="--find kv-offload: a workload YAML (as "
                                        "simulate's).")] = None,
    trace: Annotated[str | None, Out(help="--find kv-offload: a CSV trace (as "
                                     "simulate's).")] = None,
    up_to: Annotated[int | None, Out(help="End of the searched range: tokens (context; default "
                                     "the model's max_position_embeddings, else 2^24), requests "
                                     f"(concurrency; default {MAX_CONCURRENCY:,}) or GPUs (tp, "
                                     f"pp, gpus; default {MAX_DEVICES}).")] = None,
    as_json: Annotated[bool, Out("--json", help="Print one JSON object (integer bytes).")]
    = False,
    ctx: typer.Context = None,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    flags: PlanFlags = NO_FLAGS,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Answer the inverse questions with plan's ledger: the longest context,
    the most requests, the fewest GPUs or the cheapest dtype that fits.

    Every candidate is planned exactly as `servecap plan` plans it. The answer
    fits; the next step (one more token or request, one GPU fewer, a more
    precise dtype) does not, and the table names the ledger line that binds.

    Examples:

      servecap fit teaching-7b --concurrency 16   # longest context, 16 requests
      servecap fit teaching-7b --context 4096     # most requests: 39, as plan
      servecap fit llama-3.1-70b-instruct --device h100-80gb --context 8192 \\
          --concurrency 16 --find tp              # smallest tensor-parallel size
      servecap fit llama-3.1-70b-instruct --device h100-80gb --context 32768 \\
          --concurrency 64 --find gpus            # fewest GPUs, tp x pp
      servecap fit llama-3.1-8b --device 40GiB --context 32768 --concurrency 5 \\
          --find kv-dtype                         # least precision lost that fits
      servecap fit llama-3.1-8b --device l4-24gb --engine vllm --context 8192 \\
          --find kv-offload --hit-rate 0.9 --workload agents.yaml  # host tier needed

    Exit 0 with an answer, 1 when nothing in the searched range fits, 2 for bad
    input.
    """
    load_flag = "--workload" if workload is not None else "--trace" if trace is not None else None
    built = plan_scenario(model, flags, deploy)
    built = replace(built, workload=replace(built.workload, file=workload, trace=trace))
    scenario = merged(ctx, built, FIT_PATHS, scenario_file)
    workload, trace = scenario.workload.file, scenario.workload.trace
    model, flags, deploy = plan_flags_of(scenario)
    loaded = plan_cmd._load(model)
    question = _question(find, flags, deploy)
    save(scenario, save_scenario)
    if question == "kv-offload":
        from .fit_offload import offload_fit

        if not offload_fit(model, flags, deploy, loaded, hit_rate, workload, trace, as_json):
            raise typer.Exit(EXIT_DOES_NOT_FIT)
        return
    if hit_rate is not None:
        raise SpecError("--hit-rate", hit_rate, "applies with --find kv-offload")
    if load_flag is not None:  # a scenario file's workload is for the commands that run one
        raise SpecError(load_flag, workload if load_flag == "--workload" else trace,
                        f"applies with --find kv-offload (this run answers --find {question})")
    result = _search(question, model, flags, deploy, loaded, up_to)
    if as_json:
        print(json.dumps(fit_to_dict(result), indent=2))
    else:
        _render(result)
    if result.answer is None:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _question(find: str | None, flags: PlanFlags, deploy: DeployFlags) -> str:
    """--find, or what the flags leave open; the searched flag may not be given too."""
    if find is None:
        if flags.context is not None and flags.concurrency is not None:
            raise SpecError("--find", None, "--context and --concurrency are both given: say "
                            "what to search (" + ", ".join(QUESTIONS[2:]) + ")")
        find = "context" if flags.concurrency is not None else "concurrency"
    if find not in QUESTIONS:
        raise SpecError("--find", find, "allowed: " + ", ".join(QUESTIONS))
    if find == "kv-offload":
        return find
    given = {"context": ("--context", flags.context),
             "concurrency": ("--concurrency", flags.concurrency),
             "kv-dtype": ("--kv-dtype", flags.kv_dtype),
             "weight-dtype": ("--weight-dtype", flags.weight_dtype),
             "tp": ("-tp", deploy.tensor_parallel_size),
             "pp": ("-pp", deploy.pipeline_parallel_size)}
    for name in {"gpus": ("tp", "pp")}.get(find, (find,)):
        flag, value = given[name]
        if value not in (None, 1) or (value == 1 and name in ("context", "concurrency")):
            raise SpecError(flag, value, f"--find {find} searches it: drop the flag")
    return find


def _search(question: str, model, flags: PlanFlags, deploy: DeployFlags, loaded,
            up_to: int | None) -> search.Fit:
    """Each question's candidates, each planned by deployment_from_flags (plan's own path)."""
    if up_to is not None and up_to < 1:
        raise SpecError("--up-to", up_to, "a whole number >= 1")

    def at(plan_flags: PlanFlags, deploy_flags: DeployFlags = deploy):
        return plan_cmd.deployment_from_flags(model, plan_flags, deploy_flags, loaded)

    spec = loaded.spec
    if question == "context":
        high = up_to or spec.max_position_embeddings or MAX_CONTEXT_TOKENS
        end = ("--up-to" if up_to else "the model's max_position_embeddings"
               if spec.max_position_embeddings else "the longest searched, 2^24")
        return search.largest(question, lambda n: at(replace(flags, context=n)), 1, high, end)
    if question == "concurrency":
        high = min(up_to or MAX_CONCURRENCY, MAX_CONCURRENCY)
        end = "--up-to" if up_to and up_to < MAX_CONCURRENCY else "the most plan accepts"
        return search.largest(question, lambda n: at(replace(flags, concurrency=n)), 1, high,
                              end)
    if question in ("kv-dtype", "weight-dtype"):
        return _dtypes(question, flags, at, loaded)
    return _layouts(question, deploy, at, spec, up_to or MAX_DEVICES, flags)


def _dtypes(question: str, flags: PlanFlags, at, loaded) -> search.Fit:
    serve = serve_spec(flags, loaded)
    if question == "kv-dtype":
        order = search.dtypes_to_try(serve.kv_dtype, search.KV_DTYPE_ORDER)
        return search.first(question, lambda d: at(replace(flags, kv_dtype=d)), order)
    order = search.dtypes_to_try(serve.weight_dtype, search.WEIGHT_DTYPE_ORDER)
    # the declared dtype is planned as plan plans it: the checkpoint's own quantization and
    # file-derived weights; any other dtype replaces them, as --weight-dtype does
    return search.first(question, lambda d: at(flags if d == order[0] else
                                               replace(flags, weight_dtype=d)), order)


def _layouts(question: str, deploy: DeployFlags, at, spec, max_devices: int,
             flags: PlanFlags) -> search.Fit:
    tp, pp = deploy.tensor_parallel_size, deploy.pipeline_parallel_size
    if question == "tp":
        layouts = [Parallel(t, pp) for t in range(1, max_devices // pp + 1)]
    elif question == "pp":
        layouts = [Parallel(tp, p) for p in range(1, min(max_devices // tp, spec.num_layers) + 1)]
    else:
        layouts = search.device_layouts(max_devices, spec.num_layers, range(1, max_devices + 1))

    def probe(par: Parallel):
        return at(flags, replace(deploy, tensor_parallel_size=par.tensor_parallel_size,
                                 pipeline_parallel_size=par.pipeline_parallel_size))

    return search.first(question, probe, layouts, stop=True)


def _answer_value(question: str, value):
    if isinstance(value, Parallel):
        return {"tp": value.tensor_parallel_size, "pp": value.pipeline_parallel_size}.get(
            question, value.world_size)
    return value


def fit_to_dict(result: search.Fit) -> dict:
    """The answer under its unit-suffixed key, the binding line, every candidate planned, and
    the plan at the answer and at the step past it (plan's JSON keys)."""
    q, answer, beyond, bind = result.question, result.answer, result.beyond, result.binding
    return {
        "question": q,
        ANSWER_KEYS[q]: None if answer is None else _answer_value(q, answer.value),
        "fits": answer is not None,
        "range_end": result.range_end or None,
        "binding_line": bind.key if bind else None,
        "binding_line_bytes": bind.num_bytes if bind else None,
        "binding_over_bytes": bind.over_bytes if bind else None,
        "binding_reason": bind.why if bind else None,
        "next_candidate": None if beyond is None else candidate(q, beyond.value),
        "tried": [_trial(q, t) for t in result.tried],
        "plan": None if answer is None else deployment_to_dict(answer.deployment),
        "next_plan": None if beyond is None or beyond.deployment is None
        else deployment_to_dict(beyond.deployment),
    }


def _trial(question: str, trial: search.Trial) -> dict:
    out = {"candidate": candidate(question, trial.value), "fits": trial.fits,
           "refused": trial.refused or None}
    if trial.deployment is not None:
        plan, par = trial.plan, trial.deployment.parallel
        out.update({"context_tokens": plan.serve.context_tokens,
                    "concurrency": plan.serve.concurrency,
                    "tensor_parallel_size": par.tensor_parallel_size,
                    "pipeline_parallel_size": par.pipeline_parallel_size,
                    "kv_dtype": plan.serve.kv_dtype, "weight_dtype": plan.serve.weight_dtype,
                    "free_bytes": plan.free_bytes,
                    "memory_ceiling_requests": plan.memory_ceiling_requests})
    return out


def _render(result: search.Fit) -> None:
    """rich is loaded only to draw the tables: --json never needs it."""
    from .fit_view import render_fit

    render_fit(result)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(fit))
