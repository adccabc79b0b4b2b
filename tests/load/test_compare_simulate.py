"""load --compare-simulate runs the simulator on the arrivals load sent. It raised
AttributeError ('Plan' object has no attribute 'plan') after the simulator's coefficients
became per-rank (device_coefficients takes plan's per-rank deployment)."""

from servecap.cli.load_compare import compare_simulate
from servecap.scenario.spec import DEFAULT, with_values
from servecap.sim.sampling import Request
from servecap.sim.state import Seq

PICK = {"p50": 1.0, "p95": 2.0, "p99": 3.0}


def test_compare_simulate_prices_the_sent_arrivals() -> None:
    seqs = [Seq(Request(i, 0.05 * i, 64 + i, 8)) for i in range(4)]
    measured = {m: dict(PICK) for m in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")}
    scenario = with_values(DEFAULT, {"model.name": "tiny-llama", "device.name": "h100-80gb"})
    out = compare_simulate(scenario, seqs, measured)
    assert out["simulated_completed"] == 4
    assert out["metrics"]["ttft_ms"]["measured"] == PICK
    assert out["metrics"]["ttft_ms"]["simulated"]["p50"] > 0
    assert out["simulated_kv_pool_blocks"] > 0 and out["simulated_peak_kv_tokens"] > 0
