"""One Scenario under two engines or vLLM releases, figure by figure: every ledger line of the
binding rank, the pool, the ceiling and the verdict, each difference with the release rules or
the engines' budget rules that make it (ledger/release_reasons.py)."""

from dataclasses import dataclass

from servecap.ledger.devices import compute_capability
from servecap.ledger.engines import VLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.model import CHUNKED, LINEAR, SLIDING
from servecap.ledger.release_reasons import (
    RUNNER_FIGURES,
    RUNNER_RULES,
    Reason,
    reasons,
    runner_moves,
    runner_words,
)
from servecap.ledger.units import GiB
from servecap.ledger.vllm_row import TRITON, VllmRow
from servecap.ledger.vllm_runner import V1_RUNNER, V2_RUNNER, model_runner
from servecap.ledger.vllm_versions import ROWS, choose
from servecap.model_configs import LoadedModel

from .deployment import PlanResult, load, plan
from .engine import ENGINE_KNOBS, engine_spec, engine_text, knob_flag, split_engine
from .serving import model_spec
from .spec import Scenario, get, with_values


@dataclass(frozen=True)
class Side:
    """One engine's plan of the scenario: its --engine spelling, the vLLM row and model runner
    (None for other engines), and the knobs of another engine it was planned without."""

    engine: str
    result: PlanResult
    row: VllmRow | None
    runner: str | None
    dropped: tuple[str, ...]
    sampler: str | None = None  # the V1 runner's sampler (asked, else the row's)

    @property
    def label(self) -> str:
        if self.row is None:
            return self.engine
        return f"{self.engine} ({self.row.tag} rules, {self.runner.upper()} model runner)"

    @property
    def starts(self) -> bool:
        return self.result.advice is None


@dataclass(frozen=True)
class Figure:
    """One figure on both sides ('bytes', 'blocks', 'tokens', 'requests', 'x' (a ratio),
    'bool'), and why it differs: release rules crossed, or each side's own words."""

    key: str
    label: str
    unit: str
    a: float | int | bool | None
    b: float | int | bool | None
    reasons: tuple[Reason, ...] = ()
    sides: tuple[str, str] | None = None  # each side's 'from' where no release rule says why

    @property
    def changed(self) -> bool:
        return self.a != self.b


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    lines: tuple[Figure, ...]
    pool: tuple[Figure, ...]
    outcome: tuple[Figure, ...]


def compare(scenario: Scenario, against: str, loaded: LoadedModel | None = None) -> Comparison:
    """The scenario as given (its engine, or --engine) beside the same under `against`."""
    against = check_against(against)
    loaded = loaded or load(scenario)
    a, b = side(scenario, engine_text(scenario), loaded), side(scenario, against, loaded)
    context = _context(scenario, loaded, a, b)
    context["spec"] = model_spec(scenario, loaded)
    pa, pb = a.result.deployment.plan, b.result.deployment.plan
    lines = tuple(_figure(key, label, "bytes", pa.line(key), pb.line(key), a, b, context,
                          _sources(pa, pb, key)) for key, label in _line_keys(pa, pb))
    pool = tuple(_figure(key, label, unit, _budget(pa, key), _budget(pb, key), a, b, context,
                         _hows(pa, pb)) for key, label, unit in POOL)
    lines += _host_figures(pa, pb)
    behind = tuple(dict.fromkeys(r for f in lines + pool for r in f.reasons))
    outcome = (
        _figure("ceiling", "ceiling per replica", "requests", pa.memory_ceiling_requests,
                pb.memory_ceiling_requests, a, b, context),
        _verdict("starts", "vLLM starts" if VLLM in (a.engine[:4], b.engine[:4]) else
                 "starts", a.starts, b.starts, behind),
        _verdict("fits", "declared load fits", a.result.deployment.fits,
                 b.result.deployment.fits, behind))
    return Comparison(a, b, lines, pool, outcome)


def side(scenario: Scenario, engine: str, loaded: LoadedModel) -> Side:
    """The scenario planned under `engine`, without the knobs of another engine (said so)."""
    name, version = split_engine(engine)
    dropped = tuple(f"{knob_flag(path)} {get(scenario, path)}" for path, owner
                    in ENGINE_KNOBS.items() if owner != name and get(scenario, path) is not None)
    values = {path: None for path, owner in ENGINE_KNOBS.items() if owner != name}
    if name != "plain" and scenario.memory.safety is not None:
        dropped += (f"--safety {scenario.memory.safety}",)
        values["memory.safety"] = None
    planned = with_values(scenario, {**values, "engine.name": name, "engine.version": version})
    spec = engine_spec(planned)
    row = spec.vllm_row if name == VLLM else None
    runner = model_runner(row, model_spec(planned, loaded))[0] if row else None
    return Side(engine_text(planned), plan(planned, loaded), row, runner, dropped,
                spec.sampler or (row.sampler if row else None))


POOL = (("kv_pool_bytes", "KV pool", "bytes"), ("num_gpu_blocks", "GPU blocks", "blocks"),
        ("block_size_tokens", "block size", "tokens"),
        ("blocks_per_request", "blocks one request reserves", "blocks"),
        ("kv_cache_tokens", "GPU KV cache size", "tokens"),
        ("max_concurrency", "maximum concurrency", "x"))
FIGURE_OF = {"kv_pool_bytes": "pool", "block_size_tokens": "block_size"}


def _figure(key: str, label: str, unit: str, a, b, sa: Side, sb: Side, context: dict,
            sides: tuple[str, str] | None = None) -> Figure:
    if a == b:
        return Figure(key, label, unit, a, b)
    found = _release_reasons(FIGURE_OF.get(key, key), sa, sb, context) \
        if sa.row is not None and sb.row is not None else ()
    return Figure(key, label, unit, a, b, found, None if found else sides)


def _verdict(key: str, label: str, a: bool, b: bool, behind: tuple[Reason, ...]) -> Figure:
    """A verdict that changed: every reason behind the figures that changed."""
    return Figure(key, label, "bool", a, b, behind if a != b else ())


def _release_reasons(figure: str, sa: Side, sb: Side, context: dict) -> tuple[Reason, ...]:
    """The model's move between runners (where it moves), then the other rules crossed."""
    out, skip = [], ()
    if sa.runner != sb.runner:
        skip = RUNNER_RULES
        v2, v1 = (sa, sb) if sa.runner == V2_RUNNER else (sb, sa)
        moves = runner_moves(ROWS, sa.row, sb.row,
                             lambda row: model_runner(row, context["spec"])[0])
        if figure in RUNNER_FIGURES:
            out += [Reason(row.tag, (runner_words(v2.row if runner == V2_RUNNER else row,
                                                  runner, figure, v1.sampler),),
                           _with_v2_rules(row)) for row, runner in moves]
    found = out + reasons(ROWS, sa.row, sb.row, figure, context, skip)
    return tuple(sorted(found, key=lambda r: _version(r.tag)))


def _version(tag: str) -> tuple[int, ...]:
    return tuple(int(part) for part in tag.lstrip("v").split(".")[:3] if part.isdigit())


def _with_v2_rules(row: VllmRow) -> str:
    """A runner move's citation: its row's, and Model Runner V2's own rules where they were
    read (the first row with V2)."""
    first = next(r for r in ROWS if r.mrv2_sampler_bytes)
    return row.source if row is first else f"{row.source}; Model Runner V2 ({first.tag}): " \
        f"{first.source}"


def _line_keys(pa, pb) -> list[tuple[str, str]]:
    """A's lines in order, each line only B has after the line it follows in B."""
    keys = [line.key for line in pa.lines]
    labels = {line.key: line.label for line in (*pb.lines, *pa.lines)}
    for before, line in zip([None, *pb.lines], pb.lines, strict=False):
        if line.key not in keys:
            at = keys.index(before.key) + 1 if before is not None and before.key in keys else 0
            keys.insert(at, line.key)
    return [(key, labels[key]) for key in keys]


def _host_figures(pa, pb) -> tuple[Figure, ...]:
    """Host memory each rank holds (LoRA's CPU cache, the KV offload tier), labelled as host,
    and the tokens the offload tier holds; each side's 'from' says how."""
    labels = {line.key: line.label for line in (*pb.host, *pa.host)}
    out = []
    for key, label in labels.items():
        def line(plan, key=key):
            return next((item for item in plan.host if item.key == key), None)
        la, lb = line(pa), line(pb)
        out.append(Figure(key, f"{label} (host memory)", "bytes",
                          la.num_bytes if la else 0, lb.num_bytes if lb else 0,
                          sides=(la.source if la else "no such line",
                                 lb.source if lb else "no such line")))
    if pa.kv_offload is not None or pb.kv_offload is not None:
        out.append(Figure("kv_offload_tokens", "KV offload tier (host)", "tokens",
                          pa.kv_offload.tokens if pa.kv_offload else 0,
                          pb.kv_offload.tokens if pb.kv_offload else 0))
    return tuple(out)


def _sources(pa, pb, key: str) -> tuple[str, str]:
    def source(plan) -> str:
        return next((line.source for line in plan.lines if line.key == key), "no such line")
    return source(pa), source(pb)


def _budget(plan, key: str):
    if plan.budget is None:
        return None
    value = getattr(plan.budget, key)
    return round(value, 2) if isinstance(value, float) else value


def _hows(pa, pb) -> tuple[str, str]:
    def how(plan) -> str:
        return plan.budget.how if plan.budget is not None else "no engine pool (plain)"
    return how(pa), how(pb)


def _context(scenario: Scenario, loaded: LoadedModel, a: Side, b: Side) -> dict[str, bool]:
    """Which release rules bear on this deployment (release_reasons.Rule.when)."""
    spec, serve = model_spec(scenario, loaded), a.result.deployment.plan.serve
    kinds = set(spec.attention.layer_kinds)
    capability = compute_capability(serve.device_label) or (0, 0)
    runners = {a.runner, b.runner}
    samplers = {scenario.engine.sampler} | {s.row.sampler for s in (a, b) if s.row}
    # a rule of one runner bears on the comparison where both sides run on it (a move between
    # runners is said as such: _release_reasons)
    return {"v1_runner": runners == {V1_RUNNER}, "v2": runners == {V2_RUNNER},
            "runner_changed": a.runner != b.runner, "moe": spec.moe is not None,
            "mla": spec.attention.kind == "mla",
            "windows": bool(spec.attention.sliding_window_tokens) or bool(
                kinds & {SLIDING, CHUNKED}),
            "huge_gpu": serve.device_bytes >= 160 * GiB, "sm100": capability[0] == 10,
            "triton": TRITON in samplers and runners == {V1_RUNNER},
            "mamba_all": serve.mamba_cache_mode == "all" and bool(spec.state_layers),
            "gdn_hopper": capability == (9, 0) and LINEAR in kinds,
            "cold_compile": scenario.engine.cold_compile}


def check_against(against: str | None) -> str:
    """--against names an engine or a vLLM release (vllm==X, sglang, ...); an unknown one is
    refused naming --against."""
    if not against or not against.strip():
        raise SpecError("--against", None, "required: the engine or vLLM release to compare "
                        "with, e.g. vllm==0.32 or sglang")
    try:
        name, version = split_engine(against)
        if name == VLLM:
            choose(f"vllm{version or ''}")
    except SpecError as err:
        raise SpecError("--against", against, err.allowed) from None
    return against.strip()
