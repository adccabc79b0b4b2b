"""What `servecap load` sends, from its flags: conversations of one or more turns, from a
workload or trace (made-up prompts) or from a --dataset (its texts), and how they are sent."""

import random
from dataclasses import dataclass, replace
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.scenario.spec import DEFAULT
from servecap.sim.sampling import Request, arrival_times
from servecap.sim.workload import Arrivals

SHARED_PREFIX_GROUP = "shared-prefix"
# Which Scenario fields each of load's flags sets; the rest (the server's URL, --metrics,
# --nvml, what is written and shown) are the run's, not the scenario's.
LOAD_PATHS = {
    "model": ("server.served_model_name",), "workload": ("workload.file",),
    "trace": ("workload.trace",), "rate": ("workload.rate",),
    "input_len": ("workload.input_len",), "output_len": ("workload.output_len",),
    "concurrency": ("workload.max_concurrency",), "num_requests": ("workload.num_requests",),
    "duration": ("client.duration",), "timeout": ("client.timeout",),
    "vocab_size": ("client.vocab_size",), "seed": ("client.seed",),
    "sim_model": ("model.name",), "plan_device": ("device.name",),
    "coefficients": ("simulator.coefficients",), "endpoint": ("client.endpoint",),
    "dataset": ("client.dataset",), "tokenizer": ("server.tokenizer",),
    "output_tokens": ("client.output_tokens",), "turns": ("client.turns",),
    "think_time": ("client.think_time",), "shared_prefix": ("load.shared_prefix",),
    "slo_ttft": ("slo.ttft",), "slo_tpot": ("slo.tpot",), "slo_e2e": ("slo.e2e",),
    "target": ("slo.target",), "sweep": ("client.sweep",),
    "sweep_tolerance": ("client.sweep_tolerance",),
}


@dataclass(frozen=True)
class PromptFlags:
    endpoint: str = DEFAULT.client.endpoint
    dataset: Path | None = None
    tokenizer: str | None = None
    turns: int | None = None
    shared_prefix: int = DEFAULT.load.shared_prefix
    output_tokens: int | None = None
    vocab_size: int = DEFAULT.client.vocab_size
    seed: int = DEFAULT.client.seed


def prompter(flags: PromptFlags, model: str):
    """The Prompter for these flags, and the tokenizer (None without --tokenizer)."""
    from servecap.load.prompts import ENDPOINTS, Prompter

    if flags.endpoint not in ENDPOINTS:
        raise SpecError("--endpoint", flags.endpoint, "completions or chat")
    tok = None
    if flags.tokenizer is not None:
        from servecap.load.tokenize import load_tokenizer

        tok = load_tokenizer(flags.tokenizer)
    uses_ids = flags.endpoint == "completions" and tok is None and flags.dataset is None
    if not uses_ids and tok is None and (flags.dataset is None or flags.shared_prefix):
        what = "--shared-prefix text" if flags.dataset else "chat prompts of a given length"
        raise SpecError("--tokenizer", None, f"{what} are made-up words cut to a token count: "
                        "give the server's tokenizer (a folder, tokenizer.json or Hub id)")
    return Prompter(flags.endpoint, model, tok, flags.vocab_size, flags.seed, uses_ids)


def from_requests(requests: list[Request], flags: PromptFlags) -> tuple:
    """Each request starts a conversation of --turns turns (default 1) of its lengths; the
    first turn carries the shared prefix. Ids run on over the turns, request by request."""
    from servecap.load.prompts import Planned

    turns = _at_least_one(flags.turns if flags.turns is not None else 1, "--turns")
    out = []
    for index, req in enumerate(sorted(requests, key=lambda r: r.request_id)):
        first = _with_prefix(req, flags.shared_prefix)
        ids = range(index * turns, (index + 1) * turns) if turns > 1 else (req.request_id,)
        out.append(Planned(tuple(replace(first if k == 0 else req, request_id=i,
                                         prefix_group=first.prefix_group if k == 0 else None,
                                         prefix_tokens=first.prefix_tokens if k == 0 else 0)
                                 for k, i in enumerate(ids))))
    return tuple(out)


def from_dataset(flags: PromptFlags, tokenizer, rate: float | None, concurrency: int | None,
                 num_requests: int | None) -> tuple:
    """The dataset's conversations (the first --num-requests; each cut to --turns), arriving
    Poisson at --rate (seeded) or sent closed loop."""
    from servecap.load.dataset import read_dataset
    from servecap.load.prompts import Planned

    if (rate is None) == (concurrency is None):
        raise SpecError("--rate/--concurrency", "both" if rate else None, "--dataset needs "
                        "one: Poisson arrivals at --rate R, or --concurrency N in flight")
    convs = read_dataset(flags.dataset)[:num_requests or None]
    turns = _at_least_one(flags.turns, "--turns") if flags.turns is not None else None
    times = arrival_times(Arrivals("poisson", rate_per_s=rate), len(convs),
                          random.Random(flags.seed)) if rate else [0.0] * len(convs)
    out, next_id = [], 0
    for number, (conv, at_s) in enumerate(zip(convs, times, strict=True), 1):
        kept = conv.turns[:turns]
        reqs = tuple(Request(next_id + k, at_s, 0, _output_tokens(t, tokenizer, flags, number))
                     for k, t in enumerate(kept))
        reqs = (_with_prefix(reqs[0], flags.shared_prefix),) + reqs[1:]
        out.append(Planned(reqs, tuple(t.text for t in kept), conv.system))
        next_id += len(kept)
    return tuple(out)


def _output_tokens(turn, tokenizer, flags: PromptFlags, number: int) -> int:
    if turn.output_tokens is not None:
        return turn.output_tokens
    if turn.reference is not None and tokenizer is not None:
        return max(1, tokenizer.count(turn.reference) - tokenizer.count(""))
    if flags.output_tokens is not None:
        return _at_least_one(flags.output_tokens, "--output-tokens")
    raise SpecError("output_tokens", None, "each turn needs an output length: the row's "
                    "output_tokens / max_tokens, its reference answer counted with "
                    "--tokenizer, or --output-tokens N", f"{flags.dataset} conversation {number}")


def _with_prefix(req: Request, tokens: int) -> Request:
    if tokens < 0:
        raise SpecError("--shared-prefix", tokens, "a token count >= 0")
    if not tokens:
        return req
    if req.prefix_group is not None:
        raise SpecError("--shared-prefix", tokens, f"the workload already shares prefixes "
                        f"(prefix group {req.prefix_group!r}): use its prefix_groups or "
                        "--shared-prefix, not both")
    return replace(req, prefix_group=SHARED_PREFIX_GROUP, prefix_tokens=tokens,
                   prompt_tokens=req.prompt_tokens + tokens)


def _at_least_one(value: int, field: str) -> int:
    if value < 1:
        raise SpecError(field, value, "must be >= 1")
    return value
