"""--percentiles adds vllm bench serve's percentile keys and the max, leaving the default keys
as they were."""

import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from servecap.cli.narrow import print_table
from servecap.cli.sim_view import LATENCY_KEYS, least_needed, percentile_table
from servecap.sim.metrics import percentile_key, quantiles, weighted_quantiles

CHAT = (Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml").read_text()


def test_extra_percentiles_and_the_max_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 1001)]  # 1..1000: rank k is the value k
    stats = quantiles(values, (90, 99.9))
    assert stats["p90"] == 900 and stats["p99.9"] == 999 and stats["max"] == 1000
    assert stats["p50"] == 500 and stats["p99"] == 990
    assert list(quantiles(values)) == ["p50", "p95", "p99", "mean"]


def test_no_samples_gives_none_for_every_key() -> None:
    assert weighted_quantiles([], (99.9,)) == dict.fromkeys(
        ("p50", "p95", "p99", "p99.9", "mean", "max"))


@given(st.lists(st.floats(0, 1e3), min_size=1, max_size=200))
def test_percentiles_are_ordered_and_bounded_by_the_max(values) -> None:
    stats = quantiles(values, (10, 90, 99.9))
    order = [stats[k] for k in ("p10", "p50", "p90", "p95", "p99", "p99.9", "max")]
    assert order == sorted(order) and stats["max"] == max(values)


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(CHAT.replace("num_requests: 2000", "num_requests: 80"))
    return path


@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_the_flag_reaches_the_json(run, small, command) -> None:
    extra = ("--num-rates", "2") if command == "sweep" else ()
    result = run(command, "teaching-7b", "--device", "h100-80gb", "--workload", small,
                 "--percentiles", "50,90,99,99.9", "--json", *extra)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    stats = (out["policies"][0] if command == "simulate" else out["points"][0])["itl_ms"]
    assert {"p90", "p99.9", "max", "p95", "mean"} <= set(stats)


def test_the_table_shows_each_percentile_and_the_max(run, small) -> None:
    result = run("simulate", "teaching-7b", "--device", "h100-80gb", "--workload", small,
                 "--percentiles", "99.9,90")
    header = next(line for line in result.stdout.splitlines() if "p99.9" in line)
    assert header.index("p90") < header.index("p99.9") < header.index("max")


@pytest.mark.parametrize("text", ["", "0", "101", "50,,99", "x", ",".join(["50"] * 13)])
def test_bad_percentiles(run, small, text) -> None:
    result = run("simulate", "teaching-7b", "--device", "h100-80gb", "--workload", small,
                 "--percentiles", text)
    assert result.exit_code == 2 and "--percentiles" in result.stderr


def _report(keys: list[str], asked: list[float]) -> dict:
    stats = dict.fromkeys(keys, 12_345.6) | {"mean": 1.0}
    entry = {"policy": "chunked-prefill"} | {key: stats for _, key in LATENCY_KEYS}
    return {"policies": [entry], "slo": {"percentiles": asked}}


def _shown(keys: list[str], asked: list[float], width: int) -> tuple[list[str], list[str]]:
    report = _report(keys, asked)
    table = percentile_table(report)
    requested = tuple(percentile_key(q) for q in report["slo"]["percentiles"])
    console = Console(width=width, file=io.StringIO())
    dropped = print_table(console, table, drop=least_needed(table, requested))
    return [str(c.header) for c in table.columns], dropped


def test_a_narrow_terminal_drops_the_default_nobody_asked_for_first() -> None:
    """50,90,99,99.9 asked: p95 is the default nobody asked for, so it goes before any
    requested percentile (it used to be p99.9 that went, and p95 that stayed)."""
    keys = ["p50", "p90", "p95", "p99", "p99.9", "max"]
    shown, dropped = _shown(keys, [50, 90, 99, 99.9], 80)
    assert dropped == ["p95"]
    assert shown == ["policy", "metric", "p50", "p90", "p99", "p99.9", "max"]


def test_the_drop_order_keeps_the_requested_percentiles_last() -> None:
    table = percentile_table(_report(["p50", "p90", "p95", "p99", "p99.9", "max"], []))
    assert least_needed(table, ("p50", "p90", "p99", "p99.9")) == (
        "p95", "p99.9", "p90", "max", "p99")
    assert least_needed(table, ("p90", "p99.9")) == ("p95", "p99", "p50", "p99.9", "p90", "max")
    plain = percentile_table(_report(["p50", "p95", "p99"], []))
    assert least_needed(plain) == ("p95", "max", "p99")  # nothing asked: as before


def test_the_json_names_the_requested_percentiles(run, small) -> None:
    out = run("simulate", "teaching-7b", "--device", "h100-80gb", "--workload", small,
              "--percentiles", "99.9,90", "--json")
    assert json.loads(out.stdout)["slo"]["percentiles"] == [90, 99.9]
