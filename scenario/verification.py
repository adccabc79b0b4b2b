"""Where a Scenario becomes a verification: the model loaded (and scaled), planned against the
(emulated) device, run by the paged-KV runtime under the declared load and reconciled line by
line. The runtime (torch) is imported only here, when a verification runs."""

import re
from pathlib import Path

from servecap.ledger.devices import resolve_device
from servecap.ledger.errors import SpecError
from servecap.ledger.serve import MAX_CONCURRENCY

from .deployment import load
from .serving import model_spec, serve_spec
from .spec import Scenario, with_values

WHOLE_GPU = "1TiB"  # a placeholder size, replaced by the opened GPU's total before planning
PHASES = ("warmup", "declared_load", "ceiling_probe")


def verify(scenario: Scenario, progress=None, starve: tuple[int, str] | None = None,
           on_loaded=None):
    """Load, scale, plan against the (emulated) device, run and reconcile: the one call;
    progress(phase, done, total) hears each phase move (runtime.progress); on_loaded(loaded)
    sees the model as read (the CLI's notes); starve: (rank, phase) to check the failure
    path on the emulated CPU device."""
    from servecap.runtime.model import with_num_layers
    from servecap.runtime.verify import verify as run_verify
    from servecap.runtime.verify_result import ParallelResult, VerifyOptions

    rt, tp = scenario.runtime, scenario.parallel.tensor_parallel_size
    if rt.output_tokens < 1:
        raise SpecError("--output-tokens", rt.output_tokens, "must be >= 1 token")
    check_where(rt.run_on)
    if tp < 1:
        raise SpecError("--tensor-parallel-size", tp, "ranks, >= 1")
    loaded = load(scenario)
    if on_loaded is not None:
        on_loaded(loaded)
    # --weight-dtype runs a quantized checkpoint's shape unquantized, as plan reads it
    spec = model_spec(scenario, loaded)
    spec = spec if rt.num_layers is None else with_num_layers(spec, rt.num_layers)
    size_text = scenario.device.name or loaded.serving.device
    if size_text is None and rt.run_on == "cpu":
        raise SpecError("--device-memory", None, "required with --device cpu: the size of the "
                        "emulated device, e.g. 2GiB")
    device_bytes = resolve_device(size_text, "--device-memory")[0] if size_text else None
    # the whole GPU: planned against its size once the probe has opened it (with_device)
    serve = serve_spec(with_values(scenario, {"device.name": size_text or WHOLE_GPU}), loaded)
    if starve is not None and rt.run_on != "cpu":
        raise SpecError("--inject-oom", f"{starve[0]}:{starve[1]}",
                        "only with --device cpu (the emulated device's cap)")
    _check_load(serve, scenario, spec.max_position_embeddings)
    workload, name = _load(scenario, spec.vocab_size)
    options = VerifyOptions(device=rt.run_on, device_bytes=device_bytes, seed=rt.seed,
                            output_tokens=rt.output_tokens, weights_dir=rt.weights,
                            config_path=str(loaded.path), workload=workload,
                            workload_name=name, realtime=_realtime(scenario),
                            reserve_full_context=_reserve(rt.admission),
                            probe_ceiling=rt.probe, starve=starve)
    if tp == 1:
        return ParallelResult((run_verify(spec, serve, options, progress=progress),))
    from servecap.runtime.verify_parallel import verify_parallel

    return verify_parallel(spec, serve, options, tp, progress)


def _reserve(admission: str) -> bool:
    if admission not in ("reserve", "optimistic"):
        raise SpecError("--admission", admission, "allowed: reserve, optimistic")
    return admission == "reserve"


def _load(scenario: Scenario, vocab_size: int) -> tuple[tuple, str]:
    """The workload's or the trace's arrivals (one of them at most), else the declared load."""
    w = scenario.workload
    if w.file is not None and w.trace is not None:
        raise SpecError("--workload/--trace", None, "give at most one: a workload YAML or a "
                        "CSV trace")
    from servecap.runtime.workload import load_arrivals, load_trace

    if w.trace is not None:
        return load_trace(Path(w.trace), vocab_size)
    if w.file is not None:
        return load_arrivals(Path(w.file), vocab_size)
    return (), ""


def _realtime(scenario: Scenario) -> bool:
    """A trace or workload replays at its arrival times unless realtime is off."""
    if scenario.runtime.realtime is not None:
        return scenario.runtime.realtime
    return scenario.workload.trace is not None or scenario.workload.file is not None


def check_where(device: str) -> None:
    """In plan --device is a size or catalog name; here it is where to run. Say so when a
    plan-style value is given, rather than a bare 'allowed: cpu, cuda'."""
    if re.fullmatch(r"cpu|cuda(:[0-9]+)?", device.strip().lower()):
        return
    try:
        resolve_device(device, "--device")
    except SpecError:
        return  # neither reading: the runtime's own error names what is allowed
    raise SpecError("--device", device, "in verify, --device is where to run (cpu, cuda, "
                    f"cuda:N); the device's memory goes in --device-memory, e.g. --device "
                    f"cuda --device-memory {device} (in plan, --device is that size)")


def _check_load(serve, scenario: Scenario, max_position_embeddings: int) -> None:
    """Refuse what the runtime would otherwise build or cut silently: a context past the
    model's, and output that leaves no prompt."""
    _check_budget(serve)
    if max_position_embeddings and serve.context_tokens > max_position_embeddings:
        raise SpecError("--context", serve.context_tokens, f"at most the model's "
                        f"max_position_embeddings ({max_position_embeddings:,})")
    w, out = scenario.workload, scenario.runtime.output_tokens
    if w.file is None and w.trace is None and out >= serve.context_tokens:
        raise SpecError("--output-tokens", out, f"fewer than the context "
                        f"({serve.context_tokens:,} tokens): the prompt needs at least one")


def _check_budget(serve) -> None:
    """Work that would not end in reasonable time: a step budget below one block makes every
    prompt a chunk per few tokens (and the allocation counter a record of every one)."""
    if serve.max_num_batched_tokens < serve.block_size_tokens:
        raise SpecError("--max-num-batched-tokens", serve.max_num_batched_tokens,
                        f"at least one block ({serve.block_size_tokens} tokens, --block-size)")
    if serve.max_num_seqs > MAX_CONCURRENCY:
        raise SpecError("--max-num-seqs", serve.max_num_seqs, f"at most {MAX_CONCURRENCY:,}")
