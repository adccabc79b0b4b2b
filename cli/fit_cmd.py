"""`servecap fit`: the inverse questions (longest context, most requests, smallest tensor
parallel size, narrowest dtype that fits), each answered by the plan's own ledger."""

import json
from dataclasses import dataclass, replace
from typing import Annotated

import typer

from servecap.ledger import dtypes
from servecap.ledger.errors import SpecError

from .deploy import NO_DEPLOY
from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .inputs import PlanFlags
from .plan_cmd import deployment_from_flags
from .plan_json import deployment_to_dict
from .plan_view import plural

Opt = typer.Option
TP_SIZES = (1, 2, 4, 8, 16, 32, 64)
MAX_SEARCH_TOKENS = 2**24  # a context search for a model that states no limit stops here
KV_ORDER = ("bf16", "fp8", "int8", "int4")  # widest first: the first that fits loses least
WEIGHT_ORDER = ("bf16", "fp8", "int8", "int4", "fp4")


@dataclass(frozen=True)
class Answer:
    question: str
    answer: int | str | None
    why: str
    deployment: object = None  # the plan that answers it (None when nothing fits)


def fit(
    model: Annotated[str, typer.Argument(help="Bundled model name, model YAML, config.json or "
                                         "model directory.")],
    device: Annotated[str | None, Opt(help="Catalog name (h100-80gb) or size (80GiB).")] = None,
    context: Annotated[int | None, Opt("--context", "--max-model-len",
                                       help="Tokens per request.")] = None,
    concurrency: Annotated[int | None, Opt(help="Resident requests.")] = None,
    runtime_peak: Annotated[str | None, Opt(help="Measured runtime peak, e.g. 3GiB.")] = None,
    safety: Annotated[str | None, Opt(help="Safety reserve: 10% or 4GiB.")] = None,
    weight_dtype: Annotated[str | None, Opt(help="Weight dtype (default: the checkpoint's).")]
    = None,
    kv_dtype: Annotated[str | None, Opt(help="KV cache dtype (default bf16).")] = None,
    max_tensor_parallel_size: Annotated[int, Opt(help="Largest tp to try.")] = 8,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object.")] = False,
) -> None:
    """Answer the inverse questions with the plan's own ledger lines.

    --concurrency alone: the longest context that fits that many requests. --context alone:
    the most requests at that context. Both: whether the load fits, else the smallest tensor
    parallel size, the widest KV dtype and the widest weight dtype that make it fit. Examples:

      servecap fit llama-3.1-8b --device l4-24gb --concurrency 16      # longest context
      servecap fit llama-3.1-8b --device l4-24gb --context 8192        # most requests
      servecap fit llama-3.1-70b-instruct --device h100-80gb --context 8192 --concurrency 32

    Exit 0 when every question has an answer, 1 when one has none, 2 for bad input.
    """
    if context is None and concurrency is None:
        raise SpecError("--context/--concurrency", None, "give one or both: --concurrency N "
                        "asks for the longest context, --context C for the most requests")
    base = PlanFlags(device=device, context=context, concurrency=concurrency,
                     runtime_peak=runtime_peak, safety=safety, weight_dtype=weight_dtype,
                     kv_dtype=kv_dtype)
    answers = _answers(model, base, max_tensor_parallel_size)
    if as_json:
        print(json.dumps({"answers": [_to_dict(a) for a in answers]}, indent=2))
    else:
        _render(answers)
    if any(a.answer is None for a in answers):
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _answers(model: str, base: PlanFlags, max_tp: int) -> list[Answer]:
    if base.context is None:
        return [longest_context(model, base)]
    if base.concurrency is None:
        return [most_requests(model, base)]
    declared = deployment_from_flags(model, base)
    if declared.fits:
        return [Answer("does the declared load fit?", "yes", "as declared", declared)]
    return [smallest_tp(model, base, max_tp),
            widest_dtype(model, base, "kv_dtype", KV_ORDER),
            widest_dtype(model, base, "weight_dtype", WEIGHT_ORDER)]


def most_requests(model: str, base: PlanFlags) -> Answer:
    """The plan's memory-only ceiling at the declared context: today's `plan` answer."""
    result = deployment_from_flags(model, replace(base, concurrency=1))
    ceiling = result.plan.memory_ceiling_requests
    return Answer(f"most requests of {base.context:,} tokens", ceiling or None,
                  "the memory-only ceiling", result if ceiling else None)


def longest_context(model: str, base: PlanFlags) -> Answer:
    """Bisection on `fits`, which only falls as the context grows (more KV per request)."""
    def plan_at(tokens: int):
        return deployment_from_flags(model, replace(base, context=tokens))

    limit = _context_limit(model, base)
    question = f"longest context for {plural(base.concurrency, 'request')}"
    if not plan_at(1).fits:
        return Answer(question, None, "not even one token per request fits")
    if plan_at(limit).fits:
        return Answer(question, limit, "the model's own limit (max_position_embeddings) "
                      "fits", plan_at(limit))
    low, high = 1, limit  # fits(low), not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if plan_at(mid).fits else (low, mid)
    return Answer(question, low, f"{low + 1:,} tokens no longer fit", plan_at(low))


def smallest_tp(model: str, base: PlanFlags, max_tp: int) -> Answer:
    question = "smallest tensor parallel size that fits"
    for tp in (t for t in TP_SIZES if t <= max_tp):
        try:
            result = deployment_from_flags(model, base, replace(NO_DEPLOY,
                                                                tensor_parallel_size=tp))
        except SpecError as exc:  # a head count tp does not divide, or no architecture
            if tp == 1:
                raise
            return Answer(question, None, f"tp {tp}: {exc.allowed}")
        if result.fits:
            return Answer(question, tp, f"{tp * result.plan.serve.device_bytes / 2**30:,.0f} "
                          f"GiB on {tp} devices", result)
    return Answer(question, None, f"nothing up to tp {max_tp} (--max-tensor-parallel-size)")


def widest_dtype(model: str, base: PlanFlags, field: str, order: tuple[str, ...]) -> Answer:
    flag = "--" + field.replace("_", "-")
    question = f"widest {flag.removeprefix('--')} that fits (tp 1)"
    given = getattr(base, field)
    start = order.index(dtypes.lookup(given, flag, order).name) + 1 if given else 0
    for name in order[start:]:
        result = deployment_from_flags(model, replace(base, **{field: name}))
        if result.fits:
            return Answer(question, name, f"{flag} {name}", result)
    return Answer(question, None, f"none of {', '.join(order[start:])}")


def _context_limit(model: str, base: PlanFlags) -> int:
    from servecap.model_configs import load_model

    return load_model(model).spec.max_position_embeddings or MAX_SEARCH_TOKENS


def _to_dict(answer: Answer) -> dict:
    plan = deployment_to_dict(answer.deployment) if answer.deployment is not None else None
    return {"question": answer.question, "answer": answer.answer, "why": answer.why,
            "plan": plan}


def _render(answers: list[Answer]) -> None:
    from rich.console import Console
    from rich.table import Table

    from .deploy_view import render_deployment

    console = Console()
    table = Table(title="servecap fit", title_justify="left")
    for col in ("question", "answer", "why"):
        table.add_column(col, overflow="fold")
    for a in answers:
        table.add_row(a.question, "none" if a.answer is None else f"{a.answer:,}"
                      if isinstance(a.answer, int) else str(a.answer), a.why)
    console.print(table)
    first = next((a for a in answers if a.deployment is not None), None)
    if first is not None:
        console.print(f"\nthe ledger behind '{first.question}':")
        render_deployment(first.deployment, console)


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(fit))
