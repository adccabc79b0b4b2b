"""The benchmark-input record captured with every run: versions, device, topology, model, load."""

import hashlib
import json
import os
import platform
from dataclasses import asdict
from pathlib import Path

import torch

from servecap.ledger.model import ModelSpec
from servecap.ledger.plan import Plan
from servecap.ledger.units import plural


def config_hash(spec: ModelSpec, config_path: str | None) -> str:
    """sha256 of the model file as read (or of the parsed ModelSpec when there is no file)."""
    path = Path(config_path) if config_path else None
    if path is not None and path.is_file():
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    text = json.dumps(asdict(spec), sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def benchmark_record(spec: ModelSpec, plan: Plan, options, probe, tp) -> dict:
    """What a benchmark must state to be repeatable (seed 000's benchmark-input record)."""
    serve = plan.serve
    return {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        **_device(probe, tp),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "model": spec.name,
        "model_config": options.config_path or spec.source,
        "config_hash": config_hash(spec, options.config_path),
        "weights": options.weights_dir or f"seeded random, seed {options.seed}",
        "weight_dtype": serve.weight_dtype, "kv_dtype": serve.kv_dtype,
        "workload": options.workload_name or (
            f"{plural(serve.concurrency, 'request')} x {plural(serve.context_tokens, 'token')} "
            f"({options.output_tokens} output), all at t=0"),
        "seed": options.seed,
        "context_tokens": serve.context_tokens,
        "concurrency": serve.concurrency,
        "block_size_tokens": serve.block_size_tokens,
        "max_num_batched_tokens": serve.max_num_batched_tokens,
        "max_num_seqs": serve.max_num_seqs,
        "device_bytes": plan.device_bytes,
        "warmup": "one profile request before measurement",
    }


def _device(probe, tp) -> dict:
    ranks = f"tensor_parallel_size {tp.size}, rank {tp.rank}"
    if probe.kind == "cpu":
        return {"driver_version": None, "device_name": _cpu_name(),
                "topology": f"emulated devices on the CPU ({ranks}, gloo), "
                            f"{torch.get_num_threads()} threads, {os.cpu_count()} logical CPUs"}
    index = probe.device.index or 0
    props = torch.cuda.get_device_properties(index)
    return {**probe.nvml.versions(), "device_name": props.name,
            "device_total_bytes": props.total_memory,
            "topology": f"{torch.cuda.device_count()} visible CUDA device(s); using {index}; "
                        f"{ranks}" + (", NCCL" if tp.size > 1 else "")}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"
