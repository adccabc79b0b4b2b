"""search --rate-trace: the trace read strictly, each hour's fleet the cheapest that holds
its rate at one replica's SLO capacity, and the gauges at that capacity."""

import json
import math
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.errors import SpecError
from servecap.sim.search.fleet import METRICS, plan_hours, read_rate_trace, run_fleet
from servecap.sim.search.space import Axes


def _trace(tmp_path, text):
    path = tmp_path / "day.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, field", [
    ("hour,rate\n0,1\n", "--rate-trace"),
    ("hour,rate_per_s\n1,1\n", "hour"),
    ("hour,rate_per_s\n0,-1\n", "rate_per_s"),
    ("hour,rate_per_s\n0,fast\n", "rate_per_s"),
    ("hour,rate_per_s\n0,0\n1,0\n", "rate_per_s")])
def test_a_bad_trace_names_its_field(tmp_path, text, field):
    with pytest.raises(SpecError) as err:
        read_rate_trace(_trace(tmp_path, text))
    assert field in str(err.value)


def test_each_hour_takes_the_cheapest_layout_that_holds_its_rate():
    replicas = [{"layout": "big", "device": "h100", "gpus_per_replica": 1,
                 "capacity_rps": 10.0},
                {"layout": "small", "device": "l4", "gpus_per_replica": 1,
                 "capacity_rps": 2.0},
                {"layout": "none", "device": "l4", "gpus_per_replica": 1,
                 "capacity_rps": 0.0}]
    prices = {"h100": {"usd_per_gpu_hour": 3.0}, "l4": {"usd_per_gpu_hour": 0.8}}
    hours = plan_hours([(0, 0.0), (1, 4.0), (2, 9.0), (3, 30.0)], replicas, prices)
    assert [(h["layout"], h["replicas"]) for h in hours] == [
        ("small", 1), ("small", 2), ("big", 1), ("big", 3)]
    assert hours[3]["cost_usd_per_hour"] == 9.0
    assert plan_hours([(0, 1.0)], replicas[2:], prices)[0]["layout"] is None


def test_the_fleet_holds_every_hour(small_problem, small_prices):
    axes = Axes(devices=("l4-24gb", "h100-80gb"), tensor_parallel_sizes=(1,),
                max_num_seqs=(64,), max_num_batched_tokens=(2048,), max_gpus=4)
    trace = [(0, 1.0), (1, 3.0), (2, 12.0)]
    report = run_fleet(replace(small_problem, rate_per_s=12.0), axes, small_prices, trace)
    by_layout = {r["layout"]: r for r in report["replicas"]}
    assert report["space"]["layouts_priced"] == len(by_layout) >= 1
    for hour in report["hours"]:
        rep = by_layout[hour["layout"]]
        assert hour["replicas"] == max(1, math.ceil(hour["rate_per_s"] / rep["capacity_rps"]))
        gauges = rep["scale_up_thresholds"]
        assert set(gauges) == set(METRICS)
        assert gauges["vllm:num_requests_running"] > 0
        assert 0 < gauges["vllm:kv_cache_usage_perc"] <= 1
    assert report["cost_usd_per_day"] == pytest.approx(
        sum(h["cost_usd_per_hour"] for h in report["hours"]))


def test_cli_refuses_rate_beside_a_trace(tmp_path, workload_file):
    path = _trace(tmp_path, "hour,rate_per_s\n0,1\n")
    out = CliRunner().invoke(app, ["search", "llama-3.1-8b", "--workload", str(workload_file),
                                   "--rate-trace", str(path), "--rate", "2", "--slo-ttft",
                                   "1s", "--devices", "h100-80gb", "--json"])
    assert out.exit_code == 2 and "--rate" in out.output


def test_cli_json(tmp_path, workload_file):
    path = _trace(tmp_path, "hour,rate_per_s\n0,0.5\n1,2\n")
    out = CliRunner().invoke(app, ["search", "llama-3.1-8b", "--workload", str(workload_file),
                                   "--rate-trace", str(path), "--slo-ttft", "1s",
                                   "--slo-tpot", "50ms", "--devices", "h100-80gb", "--tp", "1",
                                   "--max-num-seqs", "64", "--max-num-batched-tokens", "2048",
                                   "--disaggregate", "none", "--workers", "1", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert [h["hour"] for h in report["hours"]] == [0, 1]
    assert report["metrics"] == list(METRICS)
