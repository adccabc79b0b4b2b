"""Closed-loop load: N requests in flight, the next sent as one finishes."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.sim.config import SchedulerConfig
from servecap.sim.run import simulate
from servecap.sim.state import DONE


@pytest.mark.parametrize("policy", ["continuous", "static", "chunked-prefill"])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_never_more_than_n_in_flight_and_the_next_sent_as_one_finishes(
        teaching, make_requests, policy, concurrency):
    reqs = make_requests(rate=1000.0, n=40)
    cfg = SchedulerConfig(policy=policy, concurrency=concurrency)
    res = simulate(reqs, teaching, cfg, 100_000)
    seqs = res.seqs
    assert all(s.state == DONE for s in seqs)
    events = sorted([(s.req.arrival_s, 1) for s in seqs] + [(s.release_s, -1) for s in seqs],
                    key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    assert peak == concurrency
    sends = sorted(s.req.arrival_s for s in seqs)[concurrency:]
    ends = sorted(s.release_s for s in seqs)[:len(sends)]
    assert sends == pytest.approx(ends)


def test_more_concurrency_more_throughput_longer_ttft(teaching, make_requests):
    reqs = make_requests(rate=1000.0, n=60)
    one = simulate(reqs, teaching, SchedulerConfig(concurrency=1), 100_000)
    many = simulate(reqs, teaching, SchedulerConfig(concurrency=16), 100_000)
    assert many.end_s < one.end_s


def test_simulate_and_sweep_take_concurrency(tmp_path):
    runner = CliRunner()
    args = ["llama-3.2-1b-instruct", "--device", "h100-80gb", "--workload",
            "workloads/chat.yaml", "--json"]
    out = runner.invoke(app, ["simulate", *args, "--concurrency", "8"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["policies"][0]["completed"] == report["num_requests"]
    bad = runner.invoke(app, ["simulate", *args, "--concurrency", "0"])
    assert bad.exit_code == 2 and "--concurrency" in bad.output


def test_sweep_reports_closed_loop_points_beside_open_loop_rates():
    out = CliRunner().invoke(app, [
        "sweep", "llama-3.2-1b-instruct", "--device", "h100-80gb", "--workload",
        "workloads/chat.yaml", "--num-rates", "2", "--concurrency", "4", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    closed = report["closed_loop_points"]
    assert [p["concurrency"] for p in closed] == [1, 2, 4]
    assert closed[0]["output_tokens_per_s"] < closed[-1]["output_tokens_per_s"]
    assert report["points"] and "rate_per_s" in report["points"][0]
