"""`servecap load` against `servecap serve`: every request accounted for, exact lengths."""

import csv
import json

from serve_process import Server, servecap

TRACE = [(0.0, 20, 8), (0.02, 40, 12), (0.05, 10, 5), (0.05, 30, 16), (0.2, 64, 4),
         (0.25, 17, 9)]


def _trace(path) -> None:
    path.write_text("arrival_s,prompt_tokens,output_tokens\n"
                    + "".join(f"{a},{p},{o}\n" for a, p, o in TRACE))


def _load(server, tmp_path, tag: str, *extra: str) -> tuple[dict, list, list]:
    records, tokens = tmp_path / f"{tag}-records.csv", tmp_path / f"{tag}-tokens.csv"
    run = servecap("load", server.url + "/v1", "--model", "tiny-llama", "--trace",
                   tmp_path / "trace.csv", "--records", records, "--token-times", tokens,
                   "--json", *map(str, extra))
    assert run.returncode == 0, run.stderr
    return (json.loads(run.stdout), list(csv.DictReader(records.open())),
            list(csv.DictReader(tokens.open())))


def test_open_loop_replays_the_trace_exactly(server, tmp_path):
    _trace(tmp_path / "trace.csv")
    report, rows, tokens = _load(server, tmp_path, "a", "--metrics", server.url + "/metrics")
    assert report["offered"] == report["completed"] == len(TRACE) and report["failed"] == 0
    assert report["output_token_mismatches"] == 0
    assert [float(r["arrival_s"]) for r in rows] == [a for a, _, _ in TRACE]
    assert [int(r["output_tokens"]) for r in rows] == [o for _, _, o in TRACE]
    assert [int(r["prompt_tokens"]) for r in rows] == [p for _, p, _ in TRACE]
    assert len(tokens) == sum(o for _, _, o in TRACE)
    assert report["ttft_ms"]["p50"] > 0 and report["server_metrics"]["num_samples"] >= 1
    _, rows2, _ = _load(server, tmp_path, "b", "--concurrency", "2")
    assert [r["output_tokens"] for r in rows2] == [r["output_tokens"] for r in rows]


def test_overload_beyond_the_bound_is_429_and_counted(tmp_path):
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                        + "0,16,30\n" * 8)
    server = Server("--max-num-seqs", "1", "--max-waiting", "1")
    try:
        report, rows, _ = _load(server, tmp_path, "c")
    finally:
        server.stop()
    rejected = report["http_status_counts"].get("429", 0)
    assert rejected >= 1 and report["errors"]["http_error"] == rejected
    assert report["completed"] + report["failed"] == 8 == len(rows)
    assert report["completed"] >= 1  # the first request always finds room
    assert sum(r["state"] == "rejected" and "HTTP 429" in r["reason"] for r in rows) == rejected


def test_timeouts_are_counted_not_dropped(server, tmp_path):
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                        "0,16,1500\n0,16,1500\n")
    run = servecap("load", server.url + "/v1", "--model", "tiny-llama", "--trace",
                   tmp_path / "trace.csv", "--timeout", "200ms", "--json")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["offered"] == 2 and report["errors"] == {"timeout": 2}


def test_without_model_the_servers_only_model_is_used(server, tmp_path):
    _trace(tmp_path / "trace.csv")
    run = servecap("load", server.url + "/v1", "--trace", tmp_path / "trace.csv", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["model"] == "tiny-llama" and report["completed"] == len(TRACE)


def _steady_run(server, tmp_path, num_requests: int) -> dict:
    (tmp_path / "w.yaml").write_text(
        f"name: small\nseed: 3\nnum_requests: {num_requests}\n"
        "arrivals: {kind: poisson, rate_per_s: 25}\n"
        "prompt_tokens: {kind: uniform, low: 16, high: 64}\n"
        "output_tokens: {kind: uniform, low: 4, high: 16}\n")
    run = servecap("load", server.url + "/v1", "--workload", tmp_path / "w.yaml", "--json",
                   "--metrics", server.url + "/metrics", timeout=240)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    window = report["window"]
    assert report["completed"] == num_requests, report
    assert window["measured_requests"] + window["warmup_requests"] + \
        window["drain_requests"] == num_requests
    return report


def test_a_long_enough_run_reports_its_steady_window_with_intervals(server, tmp_path):
    """The simulator's window (sim/steady.py, sim/measure.py) over what the server did:
    warm-up and drain cut, each percentile with its 95 % interval.

    The server runs on a shared machine: a 0.3 s stall of its process half-way through an
    8 s run is a backlog MSER-5 rightly reads as 'still trending'. What load tells its user
    then (run longer) is what the test does: one re-run at twice the requests."""
    report = _steady_run(server, tmp_path, 200)
    if not report["steady_state"]:
        first = report["steady_state_reason"]
        report = _steady_run(server, tmp_path, 400)
        assert report["steady_state"] is True, (first, report["steady_state_reason"])
    window = report["window"]
    assert report["steady_state_reason"] is None and window["measured_requests"] >= 100
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        low, high = window[f"{key}_ci"]["p50"]
        assert low <= window[key]["p50"] <= high, key
    low, high = window["achieved_rps_ci"]
    assert low <= window["achieved_rps"] <= high and window["queue_ms"] is None


def test_a_short_run_says_it_is_not_steady_and_why(server, tmp_path):
    _trace(tmp_path / "trace.csv")
    report, _, _ = _load(server, tmp_path, "s")
    assert report["steady_state"] is False and "too few" in report["steady_state_reason"]
    assert report["window"]["measured_requests"] == len(TRACE)


def test_the_report_on_screen_has_the_window_and_the_turns(server, tmp_path):
    _trace(tmp_path / "trace.csv")
    run = servecap("load", server.url + "/v1", "--trace", tmp_path / "trace.csv", "--turns",
                   "2")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "per turn" in run.stdout and "not at steady state (12 requests" in run.stdout
    assert "checked against the server's usage: 0 mismatches" in run.stdout


def test_the_screen_states_no_slo_without_one_and_a_one_sided_share_by_its_bounds(
        server, tmp_path):
    """No --slo-* flag: no attainment is printed (every request 'meets' no target), while
    --json keeps its keys. With a TTFT target every request meets, 6 of 6 reads 100 % with
    Wilson's interval (Wilson 1927), low end n / (n + z^2) = 6 / 9.84 = 0.61: its bounds,
    never '100.0 ±19.5' that would read up to 119.5 %."""
    _trace(tmp_path / "trace.csv")
    plain = servecap("load", server.url + "/v1", "--trace", tmp_path / "trace.csv")
    assert plain.returncode == 0, plain.stderr
    text = " ".join(plain.stdout.split())
    assert "SLO met" not in text and "no SLO given" in text
    report, _, _ = _load(server, tmp_path, "n")
    assert "slo_target_attainment" not in report and report["window"]["slo_attainment"] == 1
    slo = servecap("load", server.url + "/v1", "--trace", tmp_path / "trace.csv",
                   "--slo-ttft", "60s")
    assert slo.returncode == 0, slo.stderr
    text = " ".join(slo.stdout.split())
    low = report["window"]["slo_attainment_ci"][0] * 100
    assert f"SLO met 100.0 % (95 %: {low:,.1f}-100.0)" in text, text
    assert "100.0 ±" not in text and "no SLO given" not in text
