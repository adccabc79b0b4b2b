"""--compare-simulate: the simulator on the arrivals `load` sent, against what was measured."""

from dataclasses import replace
from pathlib import Path

from servecap.ledger.errors import SpecError

from .sim_inputs import SimFlags, device_coefficients, plan_for
from .simulate_cmd import run_simulation

COMPARED = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
POLICY = "chunked-prefill"


def compare_simulate(model: str, plan_device: str | None, coefficients: Path | None,
                     seqs: list, measured: dict) -> dict:
    """{policy, metrics: {name: {simulated: {p50, p95, p99}, measured: {...}}}, KV line}."""
    if plan_device is None:
        raise SpecError("--plan-device", None, "required with --compare-simulate: the catalog "
                        "device the simulation prices on (with --coefficients to replace its "
                        "rates)")
    from servecap.sim.config import SchedulerConfig
    from servecap.sim.kvpool import pool_blocks

    from .sim_inputs import Setup, slo_for

    flags = SimFlags(device=plan_device, coefficients=coefficients, policies=(POLICY,))
    plan = plan_for(model, flags)
    config = SchedulerConfig(policy=POLICY, max_num_batched_tokens=flags.max_num_batched_tokens,
                             max_num_seqs=flags.max_num_seqs,
                             block_size_tokens=flags.block_size)
    requests = [replace(s.req, output_tokens=s.req.output_tokens) for s in seqs]
    setup = Setup(plan, device_coefficients(plan, flags), pool_blocks(plan, flags.block_size),
                  (config,), requests, None, slo_for(flags), "load arrivals")
    report, _ = run_simulation(setup)
    simulated = report["policies"][0]
    pick = ("p50", "p95", "p99")
    return {"policy": POLICY, "model": model, "device": plan_device,
            "simulated_completed": simulated["completed"],
            "simulated_kv_pool_blocks": setup.num_blocks,
            "metrics": {m: {"simulated": {k: simulated[m][k] for k in pick},
                            "measured": {k: measured[m][k] for k in pick}} for m in COMPARED}}
