"""A pack file (several instances sharing devices, in start order) and the packing: each
instance planned by the code path `servecap plan` runs, with what the earlier instances hold on
its devices counted where its engine's rule counts it (ledger/pack.py)."""

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from servecap.ledger.devices import resolve_device
from servecap.ledger.errors import SpecError, document_kind
from servecap.ledger.pack import DeviceLedger, Held, counted_others, held, refusal, rule
from servecap.ledger.ranks import Deployment
from servecap.model_configs.reading import parse_yaml, read_text

from .deployment import deployment, load
from .engine import engine_spec, split_engine
from .file import from_dict, load_scenario, resolved_from
from .launch_line import parse_launch_line
from .spec import Scenario, with_values

KEYS = ("devices", "instances")
INSTANCE_KEYS = ("name", "gpus", "launch", "scenario", "version", "model", "engine", "flags")
# model + engine + flags, read as the engine's own launch line
PROGRAMS = {"vllm": "vllm serve {model}", "sglang": "python -m sglang.launch_server "
            "--model-path {model}", "trtllm": "trtllm-serve {model}"}
MAX_INSTANCES = 64
MAX_DEVICES = 64


@dataclass(frozen=True)
class Instance:
    """One entry: its name, the devices its ranks take (rank r on gpus[r]) and its scenario."""

    name: str
    gpus: tuple[int, ...]
    scenario: Scenario


@dataclass(frozen=True)
class PackFile:
    devices: tuple[str, ...]
    instances: tuple[Instance, ...]


@dataclass(frozen=True)
class Placed:
    """One instance as it started (refusal None) or did not: its engine and rule, the least
    memory free on its devices before its process started, its pool and ceiling."""

    name: str
    engine: str
    rule: str
    gpus: tuple[int, ...]
    free_before: int
    refusal: str | None
    held: tuple[Held, ...]
    deployment: Deployment | None


@dataclass(frozen=True)
class Packing:
    devices: tuple[DeviceLedger, ...]
    placed: tuple[Placed, ...]
    not_started: tuple[str, ...]  # instances after the first refusal, not tried

    @property
    def fits(self) -> bool:
        return all(p.refusal is None for p in self.placed) and not self.not_started


def read_pack(path: Path) -> PackFile:
    """The pack file at `path`; every failure is one SpecError naming the file."""
    where = str(path)
    try:
        data = parse_yaml(read_text(Path(path)))
        return from_mapping(data, Path(path).parent)
    except SpecError as exc:
        raise (exc if exc.source else exc.at(where)) from None


def from_mapping(data, folder: Path) -> PackFile:
    if not isinstance(data, dict):
        raise SpecError("document", document_kind(data), "a mapping with " + " and ".join(KEYS))
    for key in data:
        if key not in KEYS:
            raise SpecError(str(key), data[key], "unknown key; allowed: " + ", ".join(KEYS))
    devices = _devices(data.get("devices"))
    raw = data.get("instances")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_INSTANCES:
        raise SpecError("instances", raw, f"a list of 1 to {MAX_INSTANCES} instances, in start "
                        "order, each with launch (an engine's launch line) or scenario")
    instances = tuple(_instance(item, i, len(devices), folder) for i, item in enumerate(raw))
    names = [inst.name for inst in instances]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SpecError(f"instances[{i}].name", name, "unique: another instance has it")
    return PackFile(devices, instances)


def _devices(value) -> tuple[str, ...]:
    items = [value] if isinstance(value, str | int) and not isinstance(value, bool) else value
    if not isinstance(items, list) or not items or len(items) > MAX_DEVICES or not all(
            isinstance(v, str | int) and not isinstance(v, bool) for v in items):
        raise SpecError("devices", value, f"1 to {MAX_DEVICES} devices, each a catalog name "
                        "(servecap devices) or a size: [h100-80gb, h100-80gb]")
    for i, item in enumerate(items):
        resolve_device(str(item), f"devices[{i}]")
    return tuple(str(v) for v in items)


def _instance(item, i: int, num_devices: int, folder: Path) -> Instance:
    where = f"instances[{i}]"
    if not isinstance(item, dict):
        raise SpecError(where, item, "a mapping with launch or scenario (and name, gpus)")
    for key in item:
        if key not in INSTANCE_KEYS:
            raise SpecError(f"{where}.{key}", item[key], "unknown key; allowed: "
                            + ", ".join(INSTANCE_KEYS))
    forms = [key for key in ("launch", "scenario", "model") if key in item]
    if len(forms) != 1:
        raise SpecError(where, sorted(item), "exactly one of launch (a pasted launch line), "
                        "scenario (a scenario file or its sections) and model (with engine "
                        "and flags)")
    if "model" in item:
        item = _as_launch(item, where)
    elif "engine" in item or "flags" in item:
        raise SpecError(where, sorted(item), "engine and flags go with model; a launch line "
                        "or a scenario names its own")
    scenario = _scenario(item, where, folder)
    if "version" in item:  # the release a launch line runs (a line does not say)
        version = item["version"]
        if not isinstance(version, str | float) or isinstance(version, bool):
            raise SpecError(f"{where}.version", version, "a vLLM release: '0.9.0', '>=0.21'")
        if scenario.engine.name != "vllm":
            raise SpecError(f"{where}.version", version, "a vLLM release, for a vLLM "
                            f"instance only (this one runs {scenario.engine.name})")
        scenario = with_values(scenario, {"engine.version": str(version)})
    par = scenario.parallel
    world = par.tensor_parallel_size * par.pipeline_parallel_size
    if par.data_parallel_size != 1:
        raise SpecError(f"{where} data_parallel_size", par.data_parallel_size,
                        "1: list each replica as an instance of its own")
    if "gpus" not in item and world > num_devices:
        raise SpecError(f"{where}.gpus", None, f"{world} device indexes, one per rank (tensor "
                        f"x pipeline parallel = {world}); devices lists {num_devices}")
    gpus = _gpus(item.get("gpus", list(range(world))), f"{where}.gpus", world, num_devices)
    model = str(scenario.model.name or "").rstrip("/").rsplit("/", 1)[-1]
    name = item.get("name", f"{i + 1}: {model}"[:40])
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise SpecError(f"{where}.name", name, "a name of 1 to 64 characters")
    return Instance(name.strip(), gpus, scenario)


def _as_launch(item: dict, where: str) -> dict:
    """model: M, engine: vllm==0.9.0, flags: '--max-model-len 8192 ...' as the engine's launch
    line (engine default vllm; a release after == sets version)."""
    model, flags = item["model"], item.get("flags", "")
    if not isinstance(model, str) or not model.strip():
        raise SpecError(f"{where}.model", model, "a bundled name, a model directory or file, "
                        "or a Hub id")
    if not isinstance(flags, str):
        raise SpecError(f"{where}.flags", flags, "the engine's flags as one line: "
                        "'--max-model-len 8192 --gpu-memory-utilization 0.45'")
    try:
        name, release = split_engine(str(item.get("engine", "vllm")))
    except SpecError as exc:
        raise SpecError(f"{where}.engine", exc.value, exc.allowed) from None
    if name not in PROGRAMS:
        raise SpecError(f"{where}.engine", item.get("engine"), "vllm (vllm==X.Y for a "
                        "release), sglang or trtllm: pack applies an engine's reservation rule")
    out = {k: v for k, v in item.items() if k not in ("model", "engine", "flags")}
    out["launch"] = PROGRAMS[name].format(model=shlex.quote(model)) + " " + flags
    if release:
        if "version" in item:
            raise SpecError(f"{where}.version", item["version"], f"given twice: engine "
                            f"{item['engine']} names the release")
        out["version"] = release.removeprefix("==")
    return out


def _scenario(item: dict, where: str, folder: Path) -> Scenario:
    if "launch" in item:
        line = item["launch"]
        if not isinstance(line, str) or not line.strip():
            raise SpecError(f"{where}.launch", line, "a launch line: vllm serve MODEL ..., "
                            "python -m sglang.launch_server --model-path MODEL ...")
        try:
            # a model path relative to the pack file's folder, where it exists there
            return resolved_from(parse_launch_line(line).scenario, folder)
        except SpecError as exc:
            raise SpecError(f"{where}.launch: {exc.field}", exc.value, exc.allowed) from None
    value = item["scenario"]
    try:
        if isinstance(value, str):
            path = Path(value) if os.path.isabs(value) else folder / value
            return load_scenario(path)
        if isinstance(value, dict):
            return resolved_from(from_dict(value, where), folder)
    except SpecError as exc:
        raise SpecError(f"{where}.scenario: {exc.field}", exc.value, exc.allowed) from None
    raise SpecError(f"{where}.scenario", value, "a scenario file's path or its sections")


def _gpus(value, where: str, world: int, num_devices: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise SpecError(where, value, "a list of device indexes, e.g. [0, 1]")
    if len(value) != world:
        raise SpecError(where, value, f"{world} device indexes: one per rank (tensor x "
                        "pipeline parallel)")
    if len(set(value)) != len(value):
        raise SpecError(where, value, "distinct devices: one rank per device")
    for v in value:
        if not 0 <= v < num_devices:
            raise SpecError(where, v, f"a device index 0 to {num_devices - 1} (devices lists "
                            f"{num_devices})")
    return tuple(value)


def pack(pack_file: PackFile) -> Packing:
    """Start the instances in order; stop at the first that does not start."""
    ledgers = [DeviceLedger(i, *_device(text)) for i, text in enumerate(pack_file.devices)]
    placed: list[Placed] = []
    for n, inst in enumerate(pack_file.instances):
        try:
            result = _place(inst, pack_file.devices, ledgers)
        except SpecError as exc:  # its model, device or flags: named by the instance, as the
            if exc.field.startswith("instance"):  # file's own fields are (instances[0].gpus)
                raise
            raise SpecError(f"instances[{n}] ({inst.name}): {exc.field}", exc.value,
                            exc.allowed, exc.source) from None
        placed.append(result)
        if result.refusal is not None:
            rest = tuple(i.name for i in pack_file.instances[n + 1:])
            return Packing(tuple(ledgers), tuple(placed), rest)
        for hold, gpu in zip(result.held, inst.gpus, strict=True):
            ledgers[gpu] = ledgers[gpu].with_held(hold)
    return Packing(tuple(ledgers), tuple(placed), ())


def _device(text: str) -> tuple[str, int]:
    size, label = resolve_device(text)
    return label, size


def _place(inst: Instance, devices: tuple[str, ...], ledgers: list[DeviceLedger]) -> Placed:
    names = {devices[g] for g in inst.gpus}
    if len(names) > 1:
        raise SpecError(f"instance {inst.name!r} gpus", list(inst.gpus), "devices of one kind: "
                        "an instance is planned on one device type (" + ", ".join(sorted(names))
                        + ")")
    device = names.pop()
    asked = inst.scenario.device.name
    if asked is not None and resolve_device(str(asked)) != resolve_device(device):
        raise SpecError(f"instance {inst.name!r} device", asked, f"the pack's device {device} "
                        "(its gpus); remove the instance's device or make them one")
    scenario = with_values(inst.scenario, {"device.name": device})
    engine = engine_spec(scenario)
    kind = rule(engine)
    free = min(ledgers[g].left for g in inst.gpus)
    others = max(ledgers[g].used for g in inst.gpus)
    loaded = load(scenario)
    counted = counted_others(engine, others)
    if counted:
        alone = deployment(scenario, loaded)
        own = alone.plan.line("non_torch")
        scenario = with_values(scenario, {"memory.non_torch": own + counted})
    result = deployment(scenario, loaded)
    stage_of = [s.plan for s in result.stages for _ in s.ranks]
    holds = tuple(held(inst.name, r, engine, stage_of[r], counted) for r in range(len(inst.gpus)))
    why = next((w for plan, hold, g in zip(stage_of, holds, inst.gpus, strict=True)
                if (w := refusal(engine, plan, ledgers[g].left, hold, counted)) is not None),
               None)
    name = engine.vllm_row.name if engine.name == "vllm" else engine.name
    return Placed(inst.name, name, kind, inst.gpus, free, why, holds, result)

