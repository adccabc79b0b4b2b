"""The held-out vLLM runs (tests/fixtures/vllm_bench_heldout): they load, come from sources the
fit never read, stay out of the fit's case loader, and one of them simulates and is judged
against the shipped 95 % prediction interval (bench/vllm_latency.py --held-out)."""

import importlib.util
from pathlib import Path

from servecap.ledger.devices import find
from servecap.sim.model_error import MODEL_ERROR

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("vllm_latency", ROOT / "bench" / "vllm_latency.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
HELD = bench.load_cases(bench.HELD_OUT)
FITTED = bench.load_cases()


def test_the_held_out_folder_loads_runs_with_their_setup() -> None:
    assert bench.HELD_OUT.name == "vllm_bench_heldout" and (bench.HELD_OUT / "SOURCE.md").exists()
    assert len(HELD) >= 8 and {c.source for c in HELD}
    for case in HELD:
        assert case.data["source"].get("url", "").startswith("https://")
        assert case.data["engine_pin"] and case.data["engine_pin_note"]
        assert find(case.group["gpu"]["device"]) is not None, case.group["gpu"]
        assert case.run["load"]["kind"] in {"poisson", "all-at-once", "concurrency", "batch"}
        assert set(case.run["measured"]) & set(bench.METRICS), case.name
        assert all(v > 0 for v in case.run["measured"].values())


def test_held_out_sources_are_not_fitted_and_the_fit_does_not_load_them() -> None:
    assert not {c.source for c in HELD} & {c.source for c in FITTED}
    assert not {c.fixture for c in HELD} & {c.fixture for c in FITTED}
    assert not {c.name for c in HELD} & {c.name for c in FITTED}
    assert bench.load_cases.__defaults__[0] == bench.FIXTURES != bench.HELD_OUT


def test_one_held_out_run_simulates_and_is_judged_by_the_shipped_interval() -> None:
    case = min(HELD, key=lambda c: c.run["load"].get("num_prompts", 0))  # the 1-prompt run
    rows = bench.judged(bench.compare(case, bench.predict(case)), MODEL_ERROR["families"])
    assert {r["family"] for r in rows} == {"ttft", "tpot", "throughput"}
    for r in rows:
        low, high = r["prediction_interval"]
        assert low < r["predicted"] < high
        assert r["covered"] == (low <= r["measured"] <= high)
    summary = bench.summary(rows)
    assert summary["runs"] == 1 and 0 <= summary["inside_95_interval"] <= 1
