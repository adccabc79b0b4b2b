"""--compare-simulate: the simulator on the arrivals `load` sent, against what was measured."""

from servecap.ledger.errors import SpecError
from servecap.scenario import simulation
from servecap.scenario.spec import Scenario, with_values

from .simulate_cmd import run_simulation

COMPARED = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
NO_DEVICE = ("required with --compare-simulate and for the KV comparison of --metrics: the "
             "catalog device the plan is made for (h100-80gb)")
POLICY = "chunked-prefill"


def check(scenario: Scenario, compare: bool = False) -> None:
    """Fail before the run, not after it: the device is named and the model plans on it;
    the simulation prices its steps with a catalog device's bandwidth and FLOPS, or with a
    coefficients file's rates (load or verify --calibration-out)."""
    device = _device(scenario)
    from servecap.ledger.devices import find

    if compare and scenario.simulator.coefficients is None and find(device) is None:
        raise SpecError("--plan-device", device, "a catalog device with --compare-simulate"
                        " (`servecap devices`): its bandwidth and FLOPS price the steps (or "
                        "--coefficients from load or verify --calibration-out)")
    simulation.rank(scenario)


def compare_simulate(scenario: Scenario, seqs: list, measured: dict) -> dict:
    """{policy, metrics: {name: {simulated: {p50, p95, p99}, measured: {...}}}, KV line}:
    the scenario's simulation (scenario/simulation.py: the ledger's pool, the step model, the
    scheduler config) of one chunked-prefill engine, open loop on the arrivals load sent."""
    device = _device(scenario)
    one = with_values(scenario, {"simulator.policies": (POLICY,), "simulator.replicas": 1,
                                 "simulator.disaggregate": None,
                                 "workload.max_concurrency": None})
    setup = simulation.setup(one, [s.req for s in seqs], "load arrivals")
    report, _ = run_simulation(setup, window=False)  # every request, as load measured them
    simulated = report["policies"][0]
    pick = ("p50", "p95", "p99")
    kv = simulated.get("kv", {})
    block_size = setup.configs[0].block_size_tokens
    return {"policy": POLICY, "model": scenario.model.name, "device": device,
            "simulated_completed": simulated["completed"],
            "simulated_kv_pool_blocks": setup.num_blocks,
            "simulated_peak_kv_tokens": kv.get("peak_used_blocks", 0) * block_size,
            "metrics": {m: {"simulated": {k: simulated[m][k] for k in pick},
                            "measured": {k: measured[m][k] for k in pick}} for m in COMPARED}}


def kv_against_ledger(scenario: Scenario, scraped: dict, seqs: list) -> dict:
    """The server's peak KV tokens in use against the ledger's KV line for the same load:
    the peak running count of requests, each at the longest prompt + output sent."""
    device = _device(scenario)
    context = max((s.req.prompt_tokens + s.req.output_tokens for s in seqs), default=1)
    plan = simulation.rank(with_values(scenario, {"scheduler.max_model_len": context})).plan
    running = int(scraped.get("peak_running") or 0)
    ledger_bytes = plan.kv_bytes_per_request * running
    tokens = scraped.get("peak_kv_tokens_in_use")
    return {"model": scenario.model.name, "device": device, "context_tokens": context,
            "peak_running": running, "kv_bytes_per_token": plan.kv_bytes_per_token,
            "ledger_kv_bytes": ledger_bytes,
            "ledger_kv_tokens": ledger_bytes // max(plan.kv_bytes_per_token, 1),
            "measured_peak_kv_tokens": tokens,
            "measured_peak_kv_bytes": None if tokens is None
            else tokens * plan.kv_bytes_per_token}


def _device(scenario: Scenario) -> str:
    if scenario.device.name is None:
        raise SpecError("--plan-device", None, NO_DEVICE)
    return scenario.device.name
