"""verify's simulated-vs-measured latency table: a verdict per metric within a stated
tolerance, informational only."""

from rich.console import Console

from servecap.cli.verify_view import _simulated
from servecap.runtime.sim_check import TOLERANCE_FLOOR_MS, TOLERANCE_SHARE, with_verdicts


def _pair(sim_p50, real_p50, sim_p95, real_p95):
    return {"simulated": {"p50": sim_p50, "p95": sim_p95},
            "measured": {"p50": real_p50, "p95": real_p95}}


def _check(**metrics):
    return with_verdicts({"policy": "chunked-prefill", **metrics})


def test_within_the_tolerance_agrees_and_outside_disagrees():
    assert (TOLERANCE_SHARE, TOLERANCE_FLOOR_MS) == (0.25, 1.0)
    check = _check(ttft_ms=_pair(120, 100, 150, 125), itl_ms=_pair(10, 10, 20, 10),
                   queue_ms=_pair(0.9, 0.0, 1.0, 0.1), e2e_ms=_pair(None, 5, 5, 5))
    assert check["ttft_ms"]["verdict"] == "agrees"  # +20 % and +20 %
    assert check["itl_ms"]["verdict"] == "disagrees"  # p95 +100 %
    assert check["queue_ms"]["verdict"] == "agrees"  # within 1 ms of an empty queue
    assert check["e2e_ms"]["verdict"] == "n/a"
    assert check["verdict"] == "disagrees"
    assert check["tolerance"] == {"share": 0.25, "floor_ms": 1.0}
    assert _check(ttft_ms=_pair(100, 100, 100, 100))["verdict"] == "agrees"
    assert _check(ttft_ms=_pair(None, 1, 1, 1))["verdict"] == "n/a"


def test_the_table_carries_the_verdict_and_fits_80_columns():
    check = _check(ttft_ms=_pair(1234.5, 1000.0, 2500.25, 2000.0),
                   itl_ms=_pair(10, 30, 20, 60))
    console = Console(width=80, record=True)
    console.print(_simulated(check))
    text = console.export_text()
    assert "agrees when within 25% or 1 ms of measured" in text
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("│")}
    assert "agrees" in rows["ttft"] and "disagrees" in rows["itl"]
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_json_names_the_verdict_and_ok_ignores_it():
    from types import SimpleNamespace

    from servecap.cli.verify_json import rank_to_dict

    check = _check(itl_ms=_pair(10, 30, 20, 60))
    rec = SimpleNamespace(lines=(), predicted_ceiling_requests=1, measured_ceiling_requests=1,
                          ceiling_verdict="ok", violations=(), ceiling_failure="")
    result = SimpleNamespace(reconciliation=rec, plan=SimpleNamespace(model="m",
                                                                      device_bytes=1),
                             phases=(), record={}, latency={"simulated_vs_measured": check},
                             calibration={}, probe=None, notes=())
    out = rank_to_dict(result)
    assert out["simulation_verdict"] == "disagrees" and out["ok"] is True
    assert out["latency"]["simulated_vs_measured"]["itl_ms"]["verdict"] == "disagrees"
    result.latency = {}
    assert rank_to_dict(result)["simulation_verdict"] is None
