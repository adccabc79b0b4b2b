"""A Scenario's step model: what each iteration costs on its device (the roofline at the
catalog's or the given rates, the device's efficiency table, a coefficients file), and the
vLLM release whose scheduling and host costs run on top (by default the newest known)."""

from dataclasses import replace
from pathlib import Path

from servecap.ledger.devices import find, host_link
from servecap.ledger.engines import PLAIN
from servecap.ledger.errors import SpecError
from servecap.ledger.serve import DEFAULT_MAX_NUM_SEQS
from servecap.ledger.vllm_versions import NEWEST, VllmRow, choose
from servecap.model_configs.reading import parse_json
from servecap.sim.efficiency import for_device
from servecap.sim.rank_model import rank_coefficients
from servecap.sim.roofline import Coefficients, override
from servecap.sim.vllm_engine import Release, with_release
from servecap.sim.vllm_releases import BatchLimits

from .release import asked_version, check_async, overlap_label, release_batch_limits
from .spec import Scenario
from .values import parse_bandwidth, parse_duration, parse_flops
from .workload import read_file


def coefficients(ranked, scenario: Scenario) -> Coefficients:
    """Catalog rates (GEMMs at the weights' dtype) unless the Scenario gives a bandwidth or
    FLOPS, the device's measured efficiency table unless speed of light; then a coefficients
    file, which replaces the roofline's figures on the speed-of-light model (it was fitted on
    it). ranked: scenario.simulation.Ranked."""
    dev, sim, par = scenario.device, scenario.simulator, scenario.parallel
    device = find(dev.name or "")
    weight_dtype = ranked.plan.serve.weight_dtype
    path = None if sim.coefficients is None else Path(sim.coefficients)
    data = None if path is None else coefficients_file(path)
    bandwidth = parse_bandwidth(dev.bandwidth) if dev.bandwidth else \
        device and device.bandwidth_bytes_per_s or _rate(data, "bandwidth_bytes_per_s")
    flops = parse_flops(dev.flops) if dev.flops else \
        device and device.flops_per_s(weight_dtype) or _rate(data, "flops_per_s")
    if not bandwidth or not flops:
        missing = "--bandwidth" if not bandwidth else "--flops"
        if device is not None:
            what, example = ("memory bandwidth", "300GB/s") if not bandwidth \
                else (f"dense tensor FLOPS at {weight_dtype}", "65TFLOPS")
            raise SpecError(missing, None, f"the catalog's {device.name} states no {what} (no "
                            "vendor figure: `servecap devices` lists its sources), which the "
                            f"step model needs: give {missing}, e.g. {missing} {example}")
        named = repr(dev.name) if dev.name else \
            f"{ranked.plan.serve.device_label!r} (the model file's serving.device)"
        raise SpecError(missing, None, f"the device {named} is a bare size, not a catalog "
                        "device, so it has no memory bandwidth or FLOPS for the step model: "
                        "give --bandwidth and --flops (e.g. --bandwidth 2000GB/s --flops "
                        "990TFLOPS), or a catalog --device (servecap devices)")
    if device is None and par.tensor_parallel_size * par.pipeline_parallel_size > 1:
        raise SpecError("--device", dev.name, "a catalog name under -tp/-pp: its "
                        "interconnect prices the all-reduces and pipeline sends (see "
                        "`servecap devices`)")
    measured = None if sim.speed_of_light or path is not None \
        else for_device(device and device.name, simulated_version(scenario))
    coef = rank_coefficients(ranked.spec, ranked.deployment, bandwidth, flops,
                             parse_duration(sim.step_overhead, "--step-overhead"), device,
                             measured, expert_parallel(ranked.spec, scenario))
    if sim.step_time_cv is not None:
        if not 0 <= sim.step_time_cv < 10:
            raise SpecError("--step-time-cv", sim.step_time_cv, "a coefficient of variation "
                            "in [0, 10), e.g. 0.05")
        coef = override(coef, {"step_time_cv": sim.step_time_cv}, coef.source)
    coef = with_engine(coef, scenario, ranked.plan)
    link = host_link(device) if ranked.plan.serve.kv_offload is not None else None
    if link is not None:  # what loads an offload tier's blocks back (a vendor figure)
        coef = replace(coef, host_link_bytes_per_s=float(link[1]))
    if data is None:
        return coef
    try:
        coef = override(coef, data, f"measured: {path}" + "".join(
            f"; {name} not fitted, {why}" for name, why in starting_rates(path).items()))
    except SpecError as exc:
        raise exc.at(str(path)) from None
    # a file's fitted rates are the achieved ones: no efficiency table applies on top of them
    return replace(coef, efficiency_source=f"{coef.source} (calibrated)")


DEFAULT_ENGINE = "vllm"
"""simulator.engine left null: the newest vLLM release of ledger/vllm_versions.py, unless
--speed-of-light or a coefficients file gives the step model (then plain)."""
ENGINE_ALLOWED = "allowed: vllm (the newest release known), vllm==X.Y, vllm>=X.Y, or plain (the " \
    "device's roofline and efficiency tables alone)"


def simulated_engine(engine: str | None, speed_of_light: bool = False,
                     coefficients: object = None) -> str:
    """The --engine spelling a run simulates: the one given; else plain when --speed-of-light
    (no overheads at all) or a coefficients file (a measured step model, its own host terms
    included) describes the step; else DEFAULT_ENGINE."""
    if engine is not None:
        return engine
    return PLAIN if speed_of_light or coefficients is not None else DEFAULT_ENGINE


def simulated_row(engine: str | None, speed_of_light: bool = False,
                  coefficients: object = None) -> VllmRow | None:
    """The vLLM row a run simulates (simulated_engine's), or None for plain."""
    text = simulated_engine(engine, speed_of_light, coefficients)
    if text.strip().lower() == PLAIN:
        return None
    try:
        return choose(text).row
    except SpecError:
        raise SpecError("--engine", engine, ENGINE_ALLOWED) from None


def scenario_row(scenario: Scenario) -> VllmRow | None:
    """The vLLM row the Scenario's simulator runs, or None for plain."""
    sim = scenario.simulator
    return simulated_row(sim.engine, sim.speed_of_light, sim.coefficients)


RELEASE_POLICIES = {"v1": "chunked-prefill", "v0": "prefill-priority"}
"""The scheduler policy each vLLM engine runs unless --policy says otherwise: V1 always
chunks prefills; V0 prefills whole prompts first."""
PLAIN_POLICY = "continuous"


def policy_default_help(plain_with: str = "--speed-of-light or --coefficients") -> str:
    """What --policy defaults to, in the words every command's help gives (default_policy);
    plain_with: the command's own flags that turn the default --engine plain."""
    return (f"the release's own ({RELEASE_POLICIES['v1']} for V1, the default --engine; "
            f"{RELEASE_POLICIES['v0']} for V0, vllm<0.8; {PLAIN_POLICY} for plain: --engine "
            f"plain, or {plain_with} without --engine)")


DEFAULT_POLICY_HELP = policy_default_help()


def default_policy(row: VllmRow | None) -> str:
    """The scheduler policy a release runs unless --policy says otherwise (RELEASE_POLICIES);
    plain (no release): continuous."""
    return PLAIN_POLICY if row is None else RELEASE_POLICIES[row.formula]


def engine_label(engine: str | None, speed_of_light: bool = False,
                 coefficients: object = None) -> dict:
    """Which model runs around the kernels, for every output (`engine` in --json, the
    screen's engine line, a saved scenario's comment): the release simulated (its pin, or
    plain), whether the default chose it, and a sentence saying so."""
    row = simulated_row(engine, speed_of_light, coefficients)
    simulated = PLAIN if row is None else row.pin
    if engine is None and row is not None:
        about = (f"{simulated} (default: the newest vLLM release known, {NEWEST.tag}; "
                 "--engine plain for the roofline and efficiency tables alone)")
    elif row is not None:
        about = f"{simulated} ({row.name}, asked {engine})"
    elif engine is not None:
        about = "plain (--engine plain: the roofline and efficiency tables alone, no engine terms)"
    else:
        why = "--speed-of-light: the uncalibrated roofline" if speed_of_light else \
            "the coefficients file's step model"
        about = f"plain (default with {why}, no engine terms; --engine vllm==X adds a release's)"
    return {"simulated": simulated, "given": engine, "default": engine is None,
            "about": about}


def scenario_engine_label(scenario: Scenario) -> dict:
    """engine_label of the Scenario's simulator, with what the simulated V1 release does in
    scheduling (sim/vllm_releases.py): whether host and GPU overlap and why, its CUDA-graph
    mode and chunked prefill, each cited to vLLM's source at the tag."""
    sim = scenario.simulator
    label = engine_label(sim.engine, sim.speed_of_light, sim.coefficients)
    row = scenario_row(scenario)
    if row is None:
        return label
    return label | overlap_label(row, simulated_version(scenario),
                                 scenario.scheduler.async_scheduling,
                                 scenario.parallel.pipeline_parallel_size,
                                 scenario.speculative.model is not None)


def with_engine(coef: Coefficients, scenario: Scenario, plan=None) -> Coefficients:
    """The simulated release's host, CUDA-graph and async-scheduling terms on top of the
    device's (sim/vllm_engine.py); plain adds none, and refuses the knobs that need one.
    plan: the ledger's (its device and batch limits size the CUDA graphs)."""
    row = engine_row(scenario)
    if row is None:
        return coef
    limits = scenario_batch_limits(scenario, plan) if plan is not None else None
    seqs = scenario.scheduler.max_num_seqs or (limits.seqs if limits
                                            else DEFAULT_MAX_NUM_SEQS)
    release = Release(simulated_version(scenario), device_label=plan.serve.device_label
                      if plan is not None else "", max_num_seqs=seqs,
                      pipeline_parallel_size=scenario.parallel.pipeline_parallel_size,
                      draft_model=scenario.speculative.model is not None,
                      num_scheduler_steps=scenario.scheduler.num_scheduler_steps)
    return with_release(coef, row, scenario.engine.enforce_eager,
                        scenario.scheduler.async_scheduling, release)


def simulated_version(scenario: Scenario) -> tuple[int, ...] | None:
    """The vLLM release the Scenario simulates, as asked ('vllm==0.15' -> (0, 15)); the row's
    own version for a bare 'vllm'; None for plain."""
    row = scenario_row(scenario)
    if row is None:
        return None
    sim = scenario.simulator
    return asked_version(simulated_engine(sim.engine, sim.speed_of_light, sim.coefficients),
                         row)


def scenario_batch_limits(scenario: Scenario, plan) -> BatchLimits | None:
    """The simulated release's batch-limit defaults on the plan's device
    (scenario/release.py); None for plain."""
    row = scenario_row(scenario)
    if row is None:
        return None
    return release_batch_limits(row, simulated_version(scenario), plan.serve,
                                offline=scenario.engine.entrypoint == "llm")


def engine_row(scenario: Scenario) -> VllmRow | None:
    """The vLLM row the Scenario simulates (scenario_row), after checking the knobs that
    depend on it."""
    sched = scenario.scheduler
    row = scenario_row(scenario)
    if row is None:
        for name, value in (("--num-scheduler-steps", sched.num_scheduler_steps != 1),
                            ("--enforce-eager", scenario.engine.enforce_eager),
                            ("--async-scheduling", sched.async_scheduling)):
            if value:
                raise SpecError(name, True, "needs a vLLM release to belong to: --engine "
                                "vllm==X (plain has none)")
        return None
    name = f"{row.pin}{' (the default)' if scenario.simulator.engine is None else ''}"
    if sched.num_scheduler_steps != 1 and row.formula != "v0":
        raise SpecError("--num-scheduler-steps", sched.num_scheduler_steps, f"V0 only "
                        f"(--engine vllm<0.8); {name} is V1, which removed multi-step "
                        "scheduling")
    check_async(row, simulated_version(scenario), sched.async_scheduling, name)
    return row


def coefficients_file(path: Path) -> dict:
    """A coefficients file: the keys themselves, or under `coefficients` (a `simulate --json`
    report, `verify --calibration-out`'s fit)."""
    try:
        data = parse_json(read_file(path))
    except SpecError as exc:
        raise exc.at(str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("document", str(path), "a coefficients file is a JSON object")
    if isinstance(data.get("coefficients"), dict):
        data = {k: v for k, v in data["coefficients"].items()
                if k not in ("source", "efficiency_source")}
    return data


def starting_rates(path: Path) -> dict[str, str]:
    """The rates a calibration file holds at the fit's starting value (verify or load
    --calibration-out: its `underdetermined` reason says 'left at the ... the fit starts
    from'), each with that clause: a simulation using the file says it uses them."""
    from servecap.sim.calibrate import LEFT_AT  # the fit itself: only with --coefficients

    data = parse_json(read_file(path))
    reasons = data.get("underdetermined") if isinstance(data, dict) else None
    if not isinstance(reasons, dict):
        return {}
    return {name: why[why.index(LEFT_AT):] for name, why in reasons.items()
            if isinstance(why, str) and LEFT_AT in why}


def _rate(data: dict | None, key: str) -> float | None:
    """A coefficients file's rate where neither the Scenario nor the catalog gives one: the
    file's value replaces the roofline's anyway, so --device 16MiB needs no
    --bandwidth/--flops."""
    value = (data or {}).get(key)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return value if ok else None


def expert_parallel(spec, scenario: Scenario) -> bool:
    """Expert parallel applies to a MoE model across tensor-parallel ranks whose count divides
    its experts."""
    if not scenario.parallel.enable_expert_parallel:
        return False
    moe, tp = spec.moe, scenario.parallel.tensor_parallel_size
    if moe is None:
        raise SpecError("--enable-expert-parallel", True, f"needs a mixture-of-experts model "
                        f"({spec.name} is dense)")
    if tp < 2 or moe.num_experts % tp:
        raise SpecError("--enable-expert-parallel", True, f"needs -tp >= 2 dividing the "
                        f"{moe.num_experts} experts (got -tp {tp})")
    return True

