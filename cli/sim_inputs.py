"""Simulation inputs: device rates, durations, workload and trace files, the ledger's plan."""

import csv
import io
import re
from dataclasses import dataclass, replace
from pathlib import Path

from servecap.ledger.devices import find
from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Plan
from servecap.ledger.ranks import Deployment as RankDeployment
from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_WATERMARK,
)
from servecap.ledger.units import GB, TB, parse_size
from servecap.ledger.vllm_versions import choose
from servecap.model_configs.reading import parse_json, parse_yaml, read_text
from servecap.sim.config import SchedulerConfig
from servecap.sim.deploy import Deployment
from servecap.sim.efficiency import for_device
from servecap.sim.kvpool import pool_blocks
from servecap.sim.metrics import SLO
from servecap.sim.rank_model import rank_coefficients
from servecap.sim.roofline import Coefficients, override
from servecap.sim.sampling import Request, draw_requests
from servecap.sim.shape import fixed_shape, with_load
from servecap.sim.speculative import Speculation
from servecap.sim.trace import parse_trace
from servecap.sim.vllm_engine import engine_terms
from servecap.sim.workload import Workload, workload_from_dict

from .deploy import DeployFlags
from .inputs import PlanFlags

MAX_TRACE_BYTES = 2**30  # a million rows of a CSV trace fit well below

_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKMGTP]?)\s*(?:FLOPS|FLOP/S|flops|flop/s)?\s*$")
_PREFIX = {"": 1, "k": 1000, "K": 1000, "M": 1000 * 1000, "G": GB, "T": TB, "P": 1000 * TB}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|ms|s|min)?\s*$")
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, None: 1.0}  # None: only 0


@dataclass(frozen=True)
class SimFlags:
    """The flags simulate and sweep share; None: not given."""

    device: str | None = None
    bandwidth: str | None = None
    flops: str | None = None
    step_overhead: str = "0ms"
    coefficients: Path | None = None
    workload: Path | None = None
    trace: Path | None = None
    policies: tuple[str, ...] = ("continuous",)
    context: int | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    block_size: int = DEFAULT_BLOCK_SIZE_TOKENS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    watermark: float = DEFAULT_WATERMARK
    preemption: str = "recompute"
    prefix_caching: bool = True
    slo_ttft: str | None = None
    slo_itl: str | None = None
    slo_e2e: str | None = None
    replicas: int = 1
    router: str = "least-tokens"
    disaggregate: str | None = None
    kv_transfer: str = "50GB/s"
    runtime_peak: str | None = None
    safety: str | None = None
    num_gpu_blocks: int | None = None
    draft: str | None = None
    draft_length: int = 4
    acceptance: float = 0.7
    speculate_max_batch: int | None = None
    scheduling: str = "fcfs"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    speed_of_light: bool = False
    concurrency: int | None = None
    step_time_cv: float | None = None
    seed: int = 0
    expert_parallel: bool = False
    percentiles: str | None = None
    rate: float | None = None
    num_requests: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    engine: str | None = None
    num_scheduler_steps: int = 1
    enforce_eager: bool = False
    async_scheduling: bool = False


@dataclass(frozen=True)
class Ranked:
    """The model as flagged, plan's per-rank deployment, and its binding rank's ledger."""

    spec: ModelSpec
    deployment: RankDeployment
    hub: object = None  # HubSource when read from the Hugging Face Hub (simulate -v)

    @property
    def plan(self) -> Plan:
        return self.deployment.plan


@dataclass(frozen=True)
class Setup:
    """Everything a run needs, built once: plan, coefficients, pool, configs, requests."""

    plan: Plan
    coefficients: Coefficients
    num_blocks: int
    configs: tuple[SchedulerConfig, ...]
    requests: list[Request]
    workload: Workload | None
    slo: SLO
    source: str
    deployment: Deployment = Deployment()
    draft: Plan | None = None  # the resident draft's ledger (--draft), sharing the pool
    hub: object = None  # HubSource when the model was read from the Hugging Face Hub


def parse_bandwidth(text: str, field: str = "--bandwidth") -> float:
    """'2000GB/s' or '3.35TB/s' -> bytes per second (decimal units, as vendors state them)."""
    raw = str(text).strip()
    if not raw.lower().endswith("/s"):
        raise SpecError(field, text, "a rate like 2000GB/s or 3.35TB/s")
    rate = float(parse_size(raw[:-2], field))
    if rate <= 0:
        raise SpecError(field, text, "a rate > 0, like 2000GB/s or 3.35TB/s")
    return rate


def parse_flops(text: str, field: str = "--flops") -> float:
    """'990TFLOPS' -> 9.9e14 FLOP/s (decimal prefixes k, M, G, T, P)."""
    match = _RATE.match(str(text))
    if not match:
        raise SpecError(field, text, "a rate like 990TFLOPS or 1.98PFLOPS")
    rate = float(match.group(1)) * _PREFIX[match.group(2)]
    if rate <= 0:
        raise SpecError(field, text, "a rate > 0, like 990TFLOPS")
    return rate


def parse_duration(text: str, field: str) -> float:
    """'500ms' -> 0.5 seconds; units us, ms, s, min. A bare number is refused unless it is 0:
    '--slo-ttft 500' means 500 ms to some readers and 500 s to others."""
    match = _DURATION.match(str(text))
    if not match:
        raise SpecError(field, text, "a duration like 500ms, 0.05s or 2s (>= 0)")
    value = float(match.group(1))
    if match.group(2) is None and value != 0:
        raise SpecError(field, text, f"a duration needs its unit: {match.group(1)}ms or "
                        f"{match.group(1)}s (us, ms, s, min)")
    return value * _SECONDS[match.group(2)]


def slo_for(flags: SimFlags) -> SLO:
    def get(text, field):
        return None if text is None else parse_duration(text, field)
    return SLO(get(flags.slo_ttft, "--slo-ttft"), get(flags.slo_itl, "--slo-itl"),
               get(flags.slo_e2e, "--slo-e2e"), parse_percentiles(flags.percentiles))


def parse_percentiles(text: str | None) -> tuple[float, ...]:
    """'50,90,99,99.9' -> (50.0, 90.0, 99.0, 99.9): each in (0, 100], at most 12."""
    if text is None:
        return ()
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or len(values) > 12 or not all(0 < v <= 100 for v in values):
        raise SpecError("--percentiles", text, "comma-separated percentiles in (0, 100], at "
                        "most 12, e.g. 50,90,99,99.9")
    return tuple(sorted(set(values)))


def build_setup(model: str, flags: SimFlags) -> Setup:
    """Plan the device with the ledger, price iterations with the roofline, load the load."""
    ranked = rank_for(model, flags)
    plan = ranked.plan
    coef = device_coefficients(ranked, flags)
    drafted = draft_plan(flags.draft, _draft_flags(flags)) if flags.draft else None
    speculation = speculation_for(flags, drafted)
    configs = tuple(SchedulerConfig(
        policy=p, max_num_batched_tokens=flags.max_num_batched_tokens,
        max_num_seqs=flags.max_num_seqs, block_size_tokens=flags.block_size,
        watermark=flags.watermark, preemption_mode=flags.preemption,
        prefix_caching=flags.prefix_caching, speculation=speculation,
        scheduling=flags.scheduling, seed=flags.seed, concurrency=flags.concurrency,
        num_scheduler_steps=flags.num_scheduler_steps)
        for p in flags.policies)
    if flags.concurrency is not None and (flags.replicas > 1 or flags.disaggregate):
        raise SpecError("--concurrency", flags.concurrency, "closed loop runs one engine: drop "
                        "--replicas/--disaggregate")
    requests, workload, source = load_requests(flags)
    draft = drafted and drafted.plan
    return Setup(plan, coef, _num_blocks(plan, flags, draft), configs, requests, workload,
                 slo_for(flags), source, deployment_for(flags), draft,
                 ranked.hub)


def _num_blocks(plan: Plan, flags: SimFlags, draft: Plan | None = None) -> int:
    """The ledger's pool (a resident draft's weights and KV taken out of it), or fewer blocks
    when --num-gpu-blocks caps it (vLLM's num_gpu_blocks_override); never more than the
    device holds."""
    ledger_blocks = pool_blocks(plan, flags.block_size, draft)
    if flags.num_gpu_blocks is None:
        return ledger_blocks
    if not 1 <= flags.num_gpu_blocks <= ledger_blocks:
        raise SpecError("--num-gpu-blocks", flags.num_gpu_blocks,
                        f"between 1 and the {ledger_blocks:,} blocks the ledger leaves")
    return flags.num_gpu_blocks


def speculation_for(flags: SimFlags, drafted: Ranked | None = None) -> Speculation | None:
    """--draft MODEL: its own roofline on the same device, with --draft-length and
    --acceptance (and --speculate-max-batch, above which decoding runs plainly)."""
    if flags.draft is None:
        return None
    if flags.speculate_max_batch is not None and flags.speculate_max_batch < 1:
        raise SpecError("--speculate-max-batch", flags.speculate_max_batch, "a batch size >= 1")
    draft_flags = _draft_flags(flags)
    drafted = drafted or draft_plan(flags.draft, draft_flags)
    draft = device_coefficients(drafted, draft_flags)
    return Speculation(flags.draft_length, flags.acceptance, draft, flags.speculate_max_batch)


def _draft_flags(flags: SimFlags) -> SimFlags:
    """The target's flags for the draft, less what describes the target alone (the engine's
    host and graph terms are the target step's: a draft shares its iteration)."""
    return replace(flags, coefficients=None, runtime_peak=None, engine=None,
                   num_scheduler_steps=1, enforce_eager=False, async_scheduling=False)


def draft_plan(draft: str, flags: SimFlags) -> Ranked:
    """The draft model's ranks; a model that cannot be loaded is named as --draft."""
    try:
        return rank_for(draft, flags)
    except SpecError as exc:
        if exc.field == "model":
            raise SpecError("--draft", exc.value, exc.allowed, exc.source) from None
        raise


def deployment_for(flags: SimFlags) -> Deployment:
    """--replicas/--router, or --disaggregate P:D with --kv-transfer."""
    prefill = decode = 0
    if flags.disaggregate:
        parts = flags.disaggregate.split(":")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise SpecError("--disaggregate", flags.disaggregate, "prefill:decode device "
                            "counts, e.g. 1:1 or 2:3")
        prefill, decode = (int(p) for p in parts)
    return Deployment(flags.replicas, flags.router, prefill, decode,
                      parse_bandwidth(flags.kv_transfer, "--kv-transfer"))


def device_coefficients(ranked: Ranked, flags: SimFlags) -> Coefficients:
    """Catalog rates (GEMMs at the weights' dtype) unless --bandwidth/--flops say otherwise,
    the device's measured efficiency table unless --speed-of-light; then a coefficients file,
    which replaces the roofline's figures on the speed-of-light model (it was fitted on it)."""
    device = find(flags.device or "")
    weight_dtype = ranked.plan.serve.weight_dtype
    data = None if flags.coefficients is None else _coefficients_file(flags.coefficients)
    bandwidth = parse_bandwidth(flags.bandwidth) if flags.bandwidth else \
        device and device.bandwidth_bytes_per_s or _rate(data, "bandwidth_bytes_per_s")
    flops = parse_flops(flags.flops) if flags.flops else \
        device and device.flops_per_s(weight_dtype) or _rate(data, "flops_per_s")
    if not bandwidth or not flops:
        missing = "--bandwidth" if not bandwidth else "--flops"
        raise SpecError(missing, None, "required for a device given by size (e.g. --device "
                        "80GiB --bandwidth 2000GB/s --flops 990TFLOPS)")
    if device is None and flags.tensor_parallel_size * flags.pipeline_parallel_size > 1:
        raise SpecError("--device", flags.device, "a catalog name under -tp/-pp: its "
                        "interconnect prices the all-reduces and pipeline sends (see "
                        "`servecap devices`)")
    measured = None if flags.speed_of_light or flags.coefficients is not None \
        else for_device(device and device.name)
    coef = rank_coefficients(ranked.spec, ranked.deployment, bandwidth, flops,
                             parse_duration(flags.step_overhead, "--step-overhead"), device,
                             measured, _expert_parallel(ranked, flags))
    if flags.step_time_cv is not None:
        if not 0 <= flags.step_time_cv < 10:
            raise SpecError("--step-time-cv", flags.step_time_cv, "a coefficient of variation "
                            "in [0, 10), e.g. 0.05")
        coef = override(coef, {"step_time_cv": flags.step_time_cv}, coef.source)
    coef = with_engine(coef, flags)
    if data is None:
        return coef
    try:
        return override(coef, data, f"measured: {flags.coefficients}")
    except SpecError as exc:
        raise exc.at(str(flags.coefficients)) from None


def with_engine(coef: Coefficients, flags: SimFlags) -> Coefficients:
    """--engine vllm==X: the release's host, CUDA-graph and async-scheduling terms on top of
    the device's (sim/vllm_engine.py); without --engine the flags that need one are refused."""
    row = engine_row(flags)
    if row is None:
        return coef
    terms = engine_terms(row, flags.enforce_eager, flags.async_scheduling)
    return override(coef, terms.coefficients(), f"{coef.source}; engine {row.pin}: "
                    f"{terms.source}")


def engine_row(flags: SimFlags):
    """The vLLM row --engine picks, after checking the flags that depend on it."""
    if flags.engine is None:
        for name, value in (("--num-scheduler-steps", flags.num_scheduler_steps != 1),
                            ("--enforce-eager", flags.enforce_eager),
                            ("--async-scheduling", flags.async_scheduling)):
            if value:
                raise SpecError(name, True, "needs --engine vllm==X (the release it belongs "
                                "to)")
        return None
    row = choose(flags.engine).row
    if flags.num_scheduler_steps != 1 and row.formula != "v0":
        raise SpecError("--num-scheduler-steps", flags.num_scheduler_steps, f"V0 only "
                        f"(vllm<0.8); {row.pin} is V1, which removed multi-step scheduling")
    if flags.async_scheduling and row.formula == "v0":
        raise SpecError("--async-scheduling", True, f"V1 only (vllm>=0.8); {row.pin} is V0")
    return row


def _coefficients_file(path: Path) -> dict:
    """A coefficients file: the keys themselves, or under `coefficients` (a `simulate --json`
    report, `verify --calibration-out`'s fit)."""
    data = _read_json(path)
    if isinstance(data.get("coefficients"), dict):
        data = {k: v for k, v in data["coefficients"].items()
                if k not in ("source", "efficiency_source")}
    return data


def _rate(data: dict | None, key: str) -> float | None:
    """A coefficients file's rate where neither a flag nor the catalog gives one: the file's
    value replaces the roofline's anyway, so --device 16MiB needs no --bandwidth/--flops."""
    value = (data or {}).get(key)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return value if ok else None


def _expert_parallel(ranked: Ranked, flags: SimFlags) -> bool:
    """--enable-expert-parallel applies to a MoE model across tensor-parallel ranks whose
    count divides its experts."""
    if not flags.expert_parallel:
        return False
    moe, tp = ranked.spec.moe, flags.tensor_parallel_size
    if moe is None:
        raise SpecError("--enable-expert-parallel", True, f"needs a mixture-of-experts model "
                        f"({ranked.spec.name} is dense)")
    if tp < 2 or moe.num_experts % tp:
        raise SpecError("--enable-expert-parallel", True, f"needs -tp >= 2 dividing the "
                        f"{moe.num_experts} experts (got -tp {tp})")
    return True


def load_requests(flags: SimFlags) -> tuple[list[Request], Workload | None, str]:
    if flags.input_len is not None or flags.output_len is not None:
        workload = _fixed_shape(flags)
        return draw_requests(workload), workload, workload.name
    if (flags.workload is None) == (flags.trace is None):
        given = "both" if flags.workload is not None else None  # None reads "is missing"
        raise SpecError("--workload/--trace", given, "give exactly one: a workload YAML or a "
                        "CSV trace (or --input-len/--output-len for a fixed shape)")
    if flags.trace is not None:
        if flags.rate is not None or flags.num_requests is not None:
            raise SpecError("--rate/--num-requests", flags.rate or flags.num_requests,
                            f"a trace ({flags.trace}) carries its own arrivals: use a workload")
        text = _read_text(flags.trace)
        try:
            return parse_trace(io.StringIO(text, newline="")), None, str(flags.trace)
        except (SpecError, csv.Error) as exc:
            if isinstance(exc, csv.Error):
                raise SpecError("csv", str(exc), "a comma-separated file with the header "
                                "arrival_s,prompt_tokens,output_tokens").at(
                                    str(flags.trace)) from None
            raise exc.at(str(flags.trace)) from None
    workload = with_load(load_workload(flags.workload), flags.rate, flags.num_requests)
    return draw_requests(workload), workload, str(flags.workload)


def _fixed_shape(flags: SimFlags) -> Workload:
    if flags.workload is not None or flags.trace is not None:
        raise SpecError("--input-len/--output-len", flags.input_len or flags.output_len,
                        "a fixed shape instead of --workload/--trace, not with one")
    if flags.input_len is None or flags.output_len is None:
        raise SpecError("--output-len" if flags.output_len is None else "--input-len", None,
                        "give both --input-len and --output-len")
    return fixed_shape(flags.input_len, flags.output_len, flags.num_requests, flags.rate)


def load_workload(path: Path) -> Workload:
    try:
        data = parse_yaml(_read_text(path))
    except SpecError as exc:
        raise exc.at(str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("document", type(data).__name__, "a workload is a mapping").at(str(path))
    try:
        return workload_from_dict(data)
    except SpecError as exc:
        raise exc.at(str(path)) from None


def plan_for(model: str, flags: SimFlags) -> Plan:
    """The binding rank's ledger plan of `model` on the flagged device (one resident
    request)."""
    return rank_for(model, flags).plan


def rank_for(model: str, flags: SimFlags) -> Ranked:
    """`servecap plan`'s own per-rank deployment (one ledger, the same function) of `model`
    at --tensor/--pipeline-parallel-size, one resident request."""
    from .plan_cmd import deployment_parts

    plan_flags = PlanFlags(device=flags.device, context=flags.context, concurrency=1,
                           runtime_peak=flags.runtime_peak, safety=flags.safety,
                           weight_dtype=flags.weight_dtype, kv_dtype=flags.kv_dtype,
                           block_size=flags.block_size,
                           max_num_batched_tokens=flags.max_num_batched_tokens,
                           max_num_seqs=flags.max_num_seqs)
    deploy = DeployFlags(tensor_parallel_size=flags.tensor_parallel_size,
                         pipeline_parallel_size=flags.pipeline_parallel_size)
    return Ranked(*deployment_parts(model, plan_flags, deploy))


def _read_text(path: Path) -> str:
    """The whole file as UTF-8 text; unreadable or binary files are one SpecError."""
    return read_text(path, MAX_TRACE_BYTES)


def _read_json(path: Path) -> dict:
    try:
        data = parse_json(_read_text(path))
    except SpecError as exc:
        raise exc.at(str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("document", str(path), "a coefficients file is a JSON object")
    return data
