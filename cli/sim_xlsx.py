"""simulate/sweep --xlsx: the capacity workbook of the simulated plan, its Latency record filled."""

from dataclasses import asdict
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.ledger.units import plural
from servecap.workbooks.filename import check_workbook_name

from .deploy import DeployFlags
from .files import announce
from .inputs import PlanFlags
from .sim_inputs import Setup, SimFlags
from .workbook_cmd import _need_excel, workbook_source
from .workbook_scenario import Recording

LATENCY_KEYS = {"queue_ms": "queue_delay_ms", "ttft_ms": "ttft_ms", "itl_ms": "itl_ms",
                "e2e_ms": "e2e_ms"}
NOT_MEASURED = "not applicable: simulated from the roofline coefficients, no kernels ran"


def check_target(path: Path, force: bool) -> None:
    """Fail before simulating when the workbook could not be written."""
    _need_excel()
    path = Path(path)
    if path.is_dir() or not path.resolve().parent.is_dir():
        raise SpecError("--xlsx", str(path), "must be a file in an existing folder")
    check_workbook_name(path)
    if path.exists() and not force:
        raise SpecError("--xlsx", str(path), "file exists; pass --force to replace it")


def write_simulated_workbook(model: str, flags: SimFlags, setup: Setup, entry: dict,
                             output: Path, force: bool, note: str,
                             recording: Recording | None = None) -> Path:
    """Ledger, envelope and review sheets of the simulated device (as `servecap workbook`
    writes them); the Latency record holds `entry`'s percentiles, token rates and the
    benchmark-input record of the simulation; the Scenario sheet `recording`'s scenario."""
    _need_excel()
    from servecap.workbooks.export import build_workbook, save_workbook

    deploy = DeployFlags(tensor_parallel_size=flags.tensor_parallel_size,
                         pipeline_parallel_size=flags.pipeline_parallel_size)
    src = workbook_source(model, plan_flags(flags), deploy)  # -tp/-pp: the Ranks simulated
    record = recording and recording.rows(setup.plan, output)
    return announce(save_workbook(build_workbook(src, results=latency_results(setup, entry, note),
                                                 scenario=record), output, force))


def plan_flags(flags: SimFlags) -> PlanFlags:
    return PlanFlags(device=flags.device, context=flags.context,
                     runtime_peak=flags.runtime_peak, safety=flags.safety,
                     weight_dtype=flags.weight_dtype, kv_dtype=flags.kv_dtype,
                     dtype=flags.dtype, block_size=flags.block_size,
                     max_num_batched_tokens=flags.max_num_batched_tokens,
                     max_num_seqs=flags.max_num_seqs)


def latency_results(setup: Setup, entry: dict, note: str) -> dict:
    """One run's numbers under the Latency record's keys (ms percentiles, tokens/s)."""
    out = {sheet: {p: entry[key][p] for p in ("p50", "p95", "p99")}
           for key, sheet in LATENCY_KEYS.items() if entry["completed"]}
    if entry.get("sweep"):
        out["sweep"] = entry["sweep"]
        out["slo_ms"] = slo_lines_ms(setup)
    out["input_tokens_per_s"] = entry["input_tokens_per_s"]
    out["output_tokens_per_s"] = entry["output_tokens_per_s"]
    prompt, output = _distributions(setup)
    out["record"] = {
        "model_revision": setup.plan.model, "prompt_distribution": prompt,
        "output_distribution": output, "slo": _slo_text(setup),
        "warmup": _warmup(entry),
        "kernel_versions": NOT_MEASURED, "driver_versions": NOT_MEASURED,
        "accelerator_topology": f"{setup.plan.serve.device_label} "
                                f"({entry.get('deployment', '1 device')})",
        "offered_rate": entry.get("offered_rps"), "achieved_rate": entry["achieved_rps"],
        "load_generator": f"open loop: arrivals from {setup.source}",
        "source": f"servecap simulation, policy {entry['policy']}; {note}",
    }
    return out


def _warmup(entry: dict) -> str:
    """The warm-up the figures leave out: the steady-state window's (simulate measures from
    an empty pool and excludes its first requests), or every request when it found none."""
    if "steady_state" not in entry:
        return "none: a simulation starts from an empty pool"
    if not entry["steady_state"]:
        return ("none excluded: no steady state reached, every request measured from an empty "
                "pool")
    return (f"the first {plural(entry['warmup_requests'], 'request')} excluded (and the last "
            f"{entry['drain_requests']:,}, the drain): the figures are the steady-state "
            f"window's {entry['measured_requests']:,} requests")


def slo_lines_ms(setup: Setup) -> dict:
    """The declared SLOs as the sweep chart's flat lines, ms. The TPOT target (--slo-tpot,
    held to each request's TPOT) is drawn against the TPOT p99 series."""
    slo = setup.slo
    return {key: None if value is None else value * 1000 for key, value in
            (("ttft_p99_ms", slo.ttft_s), ("tpot_p99_ms", slo.itl_s), ("e2e_p99_ms", slo.e2e_s))}


def _distributions(setup: Setup) -> tuple[str, str]:
    if setup.workload is None:
        prompts = [r.prompt_tokens for r in setup.requests]
        outputs = [r.output_tokens for r in setup.requests]
        return _observed(prompts), _observed(outputs)
    w = setup.workload
    groups = "".join(f"; + {g.tokens} shared-prefix tokens ({g.name}) for {g.share:.0%}"
                     for g in w.prefix_groups)
    return _lengths_text(w.prompt) + groups, _lengths_text(w.output)


def _lengths_text(lengths) -> str:
    keys = {"fixed": ("value",), "uniform": ("low", "high"), "lognormal": ("median", "sigma"),
            "empirical": ("values", "weights")}[lengths.kind]
    fields = asdict(lengths)
    params = ", ".join(f"{k} {fields[k]}" for k in keys if fields[k] or k == "value")
    if (lengths.min_tokens, lengths.max_tokens) == (1, 1 << 30):
        return f"{lengths.kind}: {params}"
    return f"{lengths.kind}: {params}; clipped to [{lengths.min_tokens}, {lengths.max_tokens}]"


def _observed(values: list[int]) -> str:
    ordered = sorted(values)
    return (f"trace: {plural(len(ordered), 'request')}, min {ordered[0]}, median "
            f"{ordered[len(ordered) // 2]}, max {ordered[-1]} tokens")


def _slo_text(setup: Setup) -> str:
    slo = setup.slo
    parts = [f"{name} <= {value * 1000:g} ms" for name, value in
             (("TTFT", slo.ttft_s), ("ITL as TPOT (mean token gap)", slo.itl_s),
              ("end-to-end", slo.e2e_s))
             if value is not None]
    return ", ".join(parts) or "none declared"
