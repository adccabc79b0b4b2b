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


def test_step_time_spread_is_seeded_and_keeps_the_mean(teaching, make_requests):
    """step_time_cv draws each step around its mean: same seed, same run; another seed, other
    tails; the total busy time stays near the spread-free run's."""
    from servecap.sim.roofline import override

    reqs = make_requests(rate=5.0, n=200)
    noisy = override(teaching, {"step_time_cv": 0.2}, "m")
    plain = simulate(reqs, teaching, SchedulerConfig(), 100_000)
    a = simulate(reqs, noisy, SchedulerConfig(seed=1), 100_000)
    b = simulate(reqs, noisy, SchedulerConfig(seed=1), 100_000)
    c = simulate(reqs, noisy, SchedulerConfig(seed=2), 100_000)
    assert a.decode_end_s == b.decode_end_s and a.decode_end_s != c.decode_end_s
    per_step = (a.busy_s / a.num_iterations) / (plain.busy_s / plain.num_iterations)
    assert per_step == pytest.approx(1.0, abs=0.05)


def test_cost_prices_every_gpu_of_a_tensor_parallel_replica():
    out = CliRunner().invoke(app, ["cost", "llama-3.1-70b-instruct", "--device", "h100-80gb",
                                   "-tp", "4", "--workload", "workloads/chat.yaml",
                                   "--gpu-price", "2", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["num_gpus"] == 4 and report["gpu_price_per_h"] == 2
    per_hour = report["output_tokens_per_s"] * 3600 / 1e6
    assert report["usd_per_million_full_load"] == pytest.approx(8 / per_hour)
