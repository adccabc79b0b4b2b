"""`servecap load --calibration-out` against `servecap serve`: the simulator's step model
fitted to what the server streamed, read back by `simulate --coefficients` and by
`load --compare-simulate` (its accuracy is bench/load_calibration.py's figure)."""

import json

from serve_process import servecap

WORKLOAD = ("name: calibration\nseed: 5\nnum_requests: 80\narrivals: {kind: poisson, "
            "rate_per_s: 20}\nprompt_tokens: {kind: uniform, low: 16, high: 96}\n"
            "output_tokens: {kind: uniform, low: 8, high: 32}\n")


def test_a_fit_from_the_stream_is_what_simulate_and_compare_simulate_read(server, tmp_path):
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    cal = tmp_path / "cal.json"
    load = ("load", server.url + "/v1", "--workload", str(tmp_path / "w.yaml"), "--json")
    run = servecap(*load, "--calibration-out", str(cal), "--plan-device", "16MiB",
                   timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    fit, written = report["calibration"], json.loads(cal.read_text())
    assert fit["source"].startswith("request-level") and written["source"] == fit["source"]
    # first token and decode each; a decode whose tokens reached the client in one read has
    # no gap to time and is counted as left out (a loaded machine batches the reads)
    assert fit["num_steps"] + fit["samples_left_out"] == 2 * report["completed"] == 160
    assert fit["num_steps"] >= 120
    coefficients = written["coefficients"]
    assert coefficients == fit["coefficients"] and coefficients["flops_per_s"] > 0
    assert coefficients["step_overhead_s"] >= 0 and coefficients["bandwidth_bytes_per_s"] > 0
    # without --metrics the server's time outside the step stays in the step model, said so
    assert set(written["server_terms"]["not_fitted"]) == {"frontend_s", "cpu_step_s"}
    assert "frontend_s" not in coefficients and "cpu_step_s" not in coefficients
    sim = servecap("simulate", "tiny-llama", "--device", "16MiB", "--coefficients", str(cal),
                   "--workload", str(tmp_path / "w.yaml"), "--rate", "40", "--json",
                   timeout=120)
    assert sim.returncode == 0, sim.stderr
    predicted = json.loads(sim.stdout)["policies"][0]
    assert predicted["completed"] == 80 and predicted["tpot_ms"]["p50"] > 0
    compared = servecap(*load, "--compare-simulate", "--plan-device", "16MiB",
                        "--coefficients", str(cal), timeout=120)
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["compare_simulate"]["metrics"]
    assert rows["ttft_ms"]["simulated"]["p50"] > 0 and rows["tpot_ms"]["measured"]["p50"] > 0


def test_calibration_needs_the_plan_device_before_the_run(server, tmp_path):
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    run = servecap("load", server.url + "/v1", "--workload", str(tmp_path / "w.yaml"),
                   "--calibration-out", str(tmp_path / "c.json"))
    assert run.returncode == 2 and "--plan-device" in run.stderr, run.stderr
    assert not (tmp_path / "c.json").exists()


def test_the_servers_time_outside_the_step_is_fitted_named_and_simulated(server, tmp_path):
    """With --metrics the file carries frontend_s and cpu_step_s (the names the vLLM engine
    terms use), and simulate applies them: TTFT above the same file without them."""
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    cal = tmp_path / "cal.json"
    run = servecap("load", server.url + "/v1", "--workload", str(tmp_path / "w.yaml"),
                   "--json", "--calibration-out", str(cal), "--metrics",
                   server.url + "/metrics", "--plan-device", "16MiB", timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    ttft = report["server_metrics"]["histograms"]["vllm:time_to_first_token_seconds"]
    assert 0 < ttft["count"] <= report["completed"]
    written = json.loads(cal.read_text())
    coefficients = written["coefficients"]
    assert coefficients["frontend_s"] > 0 and coefficients["cpu_step_s"] > 0
    assert set(written["server_terms"]["fitted"]) == {"frontend_s", "cpu_step_s"}
    assert "/metrics" in written["source"] and report["calibration"]["server_terms"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(written | {"coefficients": {
        k: v for k, v in coefficients.items() if k not in ("frontend_s", "cpu_step_s")}}))

    def ttft_p50(path):
        sim = servecap("simulate", "tiny-llama", "--device", "16MiB", "--coefficients",
                       str(path), "--workload", str(tmp_path / "w.yaml"), "--rate", "40",
                       "--policy", "chunked-prefill", "--json", timeout=120)
        assert sim.returncode == 0, sim.stderr
        policy = json.loads(sim.stdout)["policies"][0]
        assert policy["completed"] == 80
        return policy["ttft_ms"]["p50"]

    assert ttft_p50(cal) > ttft_p50(bare)
