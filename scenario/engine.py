"""A Scenario's engine: whose budget semantics apply, its release and its own knobs; a knob of
another engine is an error, not silently ignored."""

import re
from dataclasses import replace

from servecap.ledger.devices import find as find_device
from servecap.ledger.engines import ENGINES, PLAIN, VLLM, EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.units import parse_size_flag
from servecap.ledger.vllm_batch import LLM, SERVE
from servecap.ledger.vllm_profile import SAMPLERS
from servecap.ledger.vllm_versions import KNOWN, choose, parse_version
from servecap.ledger.vllm_weights import MXFP4_BACKENDS

from .spec import Scenario, get

# Each engine knob, where the Scenario holds it, and the engine it belongs to.
ENGINE_KNOBS = {"memory.gpu_memory_utilization": VLLM, "memory.kv_cache_memory_bytes": VLLM,
                "memory.mem_fraction_static": "sglang",
                "memory.max_total_tokens": "sglang",
                "memory.free_gpu_memory_fraction": "trtllm", "memory.max_tokens": "trtllm",
                "engine.mxfp4_backend": VLLM,
                "engine.sampler": VLLM}
_FLAG = {"memory.kv_cache_memory_bytes": "--kv-cache-memory"}


def knob_flag(path: str) -> str:
    """The flag a Scenario field is given with on the command line."""
    return _FLAG.get(path) or "--" + path.split(".")[1].replace("_", "-")


def split_engine(text: str | None) -> tuple[str | None, str | None]:
    """'vllm==0.11' -> ('vllm', '==0.11'); 'VLLM' -> ('vllm', None); anything else must be an
    engine's name."""
    if text is None:
        return None, None
    name = str(text).strip().lower()
    if name.startswith(VLLM) and name != VLLM:
        return VLLM, name[len(VLLM):].strip()
    if name not in ENGINES:
        raise SpecError("--engine", text, "allowed: " + ", ".join(ENGINES) + " (vllm==X.Y "
                        "picks a vLLM release)")
    return name, None


def engine_text(scenario: Scenario) -> str:
    """The --engine spelling of the Scenario's engine (or the one its knobs imply) and
    release."""
    name, version = implied_engine(scenario), scenario.engine.version
    if not version:
        return name
    return f"{name}=={version}" if version[0].isdigit() else f"{name}{version}"


def implied_engine(scenario: Scenario) -> str:
    """The engine named, else the one engine whose knobs were given, else plain."""
    name, _ = split_engine(scenario.engine.name)
    if name is not None:
        return name
    owners = {owner for path, owner in ENGINE_KNOBS.items() if get(scenario, path) is not None}
    return owners.pop() if len(owners) == 1 else PLAIN


def engine_spec(scenario: Scenario) -> EngineSpec:
    """The engine and its knobs, with the lines declared from measurement."""
    name = implied_engine(scenario)
    for path, owner in ENGINE_KNOBS.items():
        value = get(scenario, path)
        if value is not None and name != owner:
            raise SpecError(knob_flag(path), value, f"applies to --engine {owner} (got "
                            f"--engine {name})")
    mem = scenario.memory
    return EngineSpec(
        name=name, gpu_memory_utilization=mem.gpu_memory_utilization,
        **_vllm_knobs(scenario, name),
        kv_cache_memory_bytes=_vllm_size(mem.kv_cache_memory_bytes, "--kv-cache-memory"),
        mem_fraction_static=mem.mem_fraction_static,
        free_gpu_memory_fraction=mem.free_gpu_memory_fraction, max_tokens=mem.max_tokens,
        max_total_tokens=mem.max_total_tokens,
        non_torch_bytes=size(mem.non_torch, "--non-torch"),
        comm_buffer_bytes=size(mem.comm_buffer, "--comm-buffer"),
        cuda_graph_bytes=size(mem.cuda_graph_memory, "--cuda-graph-memory"),
        enforce_eager=_eager(scenario, name))


def _eager(scenario: Scenario, name: str) -> bool:
    """vLLM's --enforce-eager: no CUDA graphs (a measured graph pool other than 0 contradicts
    it; reconcile declares 0 for a log started eager)."""
    if not scenario.engine.enforce_eager or name != VLLM:
        return False
    declared = size(scenario.memory.cuda_graph_memory, "--cuda-graph-memory")
    if declared:
        raise SpecError("--cuda-graph-memory", scenario.memory.cuda_graph_memory, "not with "
                        "--enforce-eager: vLLM captures no CUDA graphs then (only 0)")
    return True


def with_device(engine: EngineSpec, device: str | None, batched_tokens: int | None):
    """The device's FP4 support (which MXFP4 kernel vLLM picks) and a declared batch."""
    found = find_device(device) if device else None
    return replace(engine, native_fp4=bool(found and found.fp4_flops_per_s),
                   max_num_batched_tokens=batched_tokens)


def _vllm_knobs(scenario: Scenario, name: str) -> dict:
    """The vLLM row the release picks (none: the newest, said so) and its own knobs."""
    if name != VLLM:
        return {}
    eng, seqs = scenario.engine, scenario.scheduler.max_num_seqs
    choice = choose(engine_text(scenario))
    if eng.entrypoint not in (SERVE, LLM):
        raise SpecError("--entrypoint", eng.entrypoint, f"{SERVE} or {LLM}")
    if eng.mxfp4_backend is not None and eng.mxfp4_backend not in MXFP4_BACKENDS:
        raise SpecError("--mxfp4-backend", eng.mxfp4_backend, ", ".join(MXFP4_BACKENDS))
    if eng.sampler is not None and eng.sampler not in SAMPLERS:
        raise SpecError("--sampler", eng.sampler, ", ".join(SAMPLERS))
    if seqs is not None and seqs < 1:
        raise SpecError("--max-num-seqs", seqs, "a whole number >= 1")
    asked = None if choice.asked == VLLM else parse_version(choice.asked)
    return {"vllm_row": choice.row, "asked_release": asked,
            "version_note": choice.note or f"vLLM rules: "
            f"{choice.row.name} ({choice.row.tag}); {KNOWN}", "entrypoint": eng.entrypoint,
            "max_num_seqs": seqs, "mxfp4_backend": eng.mxfp4_backend,
            "sampler": eng.sampler, "cold_compile": eng.cold_compile}


_HUMAN = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)([kKmMgGtT])\s*")


def human_readable_int(text, field: str) -> int:
    """vLLM's human_readable_int: '20G' = 20 x 2**30, '20g' = 20 x 10**9 ('K'/'k' ...), or a
    plain whole number."""
    match = _HUMAN.fullmatch(str(text))
    if match:
        power = "kmgt".index(match.group(2).lower()) + 1
        base = 1024 if match.group(2).isupper() else 1000
        return int(float(match.group(1)) * base**power)
    try:
        return int(str(text).strip())
    except ValueError:
        raise SpecError(field, text, "a whole number, or vLLM's 8k (8,000) / 8K (8,192)") \
            from None


def _vllm_size(text, field: str) -> int | None:
    """A KV pool size: vLLM's human_readable_int (20G) or servecap's sizes (20GiB)."""
    if text is not None and _HUMAN.fullmatch(str(text)):
        return human_readable_int(text, field)
    return size(text, field)


def size(text, field: str) -> int | None:
    """A size line of the Scenario ('3GiB' or a byte count) in bytes; None when not given."""
    return None if text is None else parse_size_flag(str(text), field)
