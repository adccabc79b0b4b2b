"""--compare-simulate: the simulator on the arrivals `load` sent, against what was measured."""

from dataclasses import replace
from pathlib import Path

from servecap.ledger.errors import SpecError

from .sim_inputs import SimFlags, device_coefficients, plan_for, rank_for
from .simulate_cmd import run_simulation

COMPARED = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
NO_DEVICE = ("required with --compare-simulate and for the KV comparison of --metrics: the "
             "catalog device the plan is made for (h100-80gb)")
POLICY = "chunked-prefill"


def check(model: str, plan_device: str | None, compare: bool = False,
          coefficients: Path | None = None) -> None:
    """Fail before the run, not after it: the device is named and the model plans on it;
    the simulation prices its steps with a catalog device's bandwidth and FLOPS, or with a
    coefficients file's rates (load or verify --calibration-out)."""
    if plan_device is None:
        raise SpecError("--plan-device", None, NO_DEVICE)
    from servecap.ledger.devices import find

    if compare and coefficients is None and find(plan_device) is None:
        raise SpecError("--plan-device", plan_device, "a catalog device with --compare-simulate"
                        " (`servecap devices`): its bandwidth and FLOPS price the steps (or "
                        "--coefficients from load or verify --calibration-out)")
    plan_for(model, SimFlags(device=plan_device))


def compare_simulate(model: str, plan_device: str | None, coefficients: Path | None,
                     seqs: list, measured: dict) -> dict:
    """{policy, metrics: {name: {simulated: {p50, p95, p99}, measured: {...}}}, KV line}."""
    if plan_device is None:
        raise SpecError("--plan-device", None, NO_DEVICE)
    from servecap.sim.config import SchedulerConfig
    from servecap.sim.kvpool import pool_blocks

    from .sim_inputs import Setup, slo_for

    flags = SimFlags(device=plan_device, coefficients=coefficients, policies=(POLICY,))
    ranked = rank_for(model, flags)
    plan = ranked.plan
    config = SchedulerConfig(policy=POLICY, max_num_batched_tokens=flags.max_num_batched_tokens,
                             max_num_seqs=flags.max_num_seqs,
                             block_size_tokens=flags.block_size)
    requests = [replace(s.req, output_tokens=s.req.output_tokens) for s in seqs]
    setup = Setup(plan, device_coefficients(ranked, flags), pool_blocks(plan, flags.block_size),
                  (config,), requests, None, slo_for(flags), "load arrivals")
    report, _ = run_simulation(setup, window=False)  # every request, as load measured them
    simulated = report["policies"][0]
    pick = ("p50", "p95", "p99")
    kv = simulated.get("kv", {})
    return {"policy": POLICY, "model": model, "device": plan_device,
            "simulated_completed": simulated["completed"],
            "simulated_kv_pool_blocks": setup.num_blocks,
            "simulated_peak_kv_tokens": kv.get("peak_used_blocks", 0) * flags.block_size,
            "metrics": {m: {"simulated": {k: simulated[m][k] for k in pick},
                            "measured": {k: measured[m][k] for k in pick}} for m in COMPARED}}


def kv_against_ledger(model: str, plan_device: str | None, scraped: dict, seqs: list) -> dict:
    """The server's peak KV tokens in use against the ledger's KV line for the same load:
    the peak running count of requests, each at the longest prompt + output sent."""
    if plan_device is None:
        raise SpecError("--plan-device", None, NO_DEVICE)
    context = max((s.req.prompt_tokens + s.req.output_tokens for s in seqs), default=1)
    plan = plan_for(model, SimFlags(device=plan_device, context=context))
    running = int(scraped.get("peak_running") or 0)
    ledger_bytes = plan.kv_bytes_per_request * running
    tokens = scraped.get("peak_kv_tokens_in_use")
    return {"model": model, "device": plan_device, "context_tokens": context,
            "peak_running": running, "kv_bytes_per_token": plan.kv_bytes_per_token,
            "ledger_kv_bytes": ledger_bytes,
            "ledger_kv_tokens": ledger_bytes // max(plan.kv_bytes_per_token, 1),
            "measured_peak_kv_tokens": tokens,
            "measured_peak_kv_bytes": None if tokens is None
            else tokens * plan.kv_bytes_per_token}
