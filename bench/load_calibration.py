"""Calibrate the simulator from a real server at one rate, predict it at another.

    .venv/bin/python bench/load_calibration.py [RATE_CALIBRATE] [RATE_PREDICT] [NUM_REQUESTS]

Starts `servecap serve tiny-llama` on a free loopback port, runs `servecap load` at the
first rate with --calibration-out and --metrics (the step model fitted to the streamed token
times, the server's time outside the step from its /metrics histograms), then
`servecap simulate tiny-llama --coefficients` and a measured `servecap load` at the second,
and prints the TTFT and TPOT p50 of each with the simulation's error. Target: within 25 %.
The workload: Poisson arrivals, prompts 16-96 tokens, outputs 8-32 tokens.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "serve"))
from serve_process import Server, servecap  # noqa: E402

WORKLOAD = ("name: calibration\nseed: 5\nnum_requests: {n}\narrivals: {{kind: poisson, "
            "rate_per_s: 10}}\nprompt_tokens: {{kind: uniform, low: 16, high: 96}}\n"
            "output_tokens: {{kind: uniform, low: 8, high: 32}}\n")
TARGET = 0.25


def _json(run) -> dict:
    if run.returncode != 0:
        raise SystemExit(run.stderr)
    return json.loads(run.stdout)


def main(rate_a: float = 10.0, rate_b: float = 30.0, num: int = 200) -> None:
    folder = Path(tempfile.mkdtemp())
    workload, cal = folder / "w.yaml", folder / "cal.json"
    workload.write_text(WORKLOAD.format(n=num))
    server = Server()
    try:
        load = ("load", server.url + "/v1", "--workload", str(workload), "--json")
        first = _json(servecap(*load, "--rate", str(rate_a), "--calibration-out", str(cal),
                               "--metrics", server.url + "/metrics", "--plan-device", "16MiB",
                               timeout=600))
        fit, at_a = first["calibration"], first["window"]
        measured = _json(servecap(*load, "--rate", str(rate_b), timeout=600))["window"]
    finally:
        server.stop()
    sim = _json(servecap("simulate", "tiny-llama", "--device", "16MiB", "--coefficients",
                         str(cal), "--workload", str(workload), "--rate", str(rate_b),
                         "--policy", "chunked-prefill", "--json", timeout=600))["policies"][0]
    print(f"calibrated at {rate_a:g} req/s ({num} requests, {fit['num_steps']} samples, "
          f"{fit['num_outliers']} outliers, residual CV {fit['residual_cv']:.2f}); "
          f"predicted at {rate_b:g} req/s; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"measured at {rate_a:g} req/s: TTFT p50 {at_a['ttft_ms']['p50']:.2f} ms, TPOT p50 "
          f"{at_a['tpot_ms']['p50']:.2f} ms")
    terms = fit["coefficients"]
    print(f"server terms: frontend_s {terms.get('frontend_s', 0) * 1e3:.3f} ms, cpu_step_s "
          f"{terms.get('cpu_step_s', 0) * 1e3:.3f} ms, step_overhead_s "
          f"{terms['step_overhead_s'] * 1e3:.3f} ms; not fitted: "
          f"{fit['server_terms']['not_fitted'] or 'none'}")
    for key in ("ttft_ms", "tpot_ms"):
        got, want = sim[key]["p50"], measured[key]["p50"]
        error = (got - want) / want
        verdict = "within" if abs(error) <= TARGET else "MISSES"
        print(f"{key[:-3].upper()} p50: simulated {got:.2f} ms, measured {want:.2f} ms, "
              f"error {error:+.0%} ({verdict} the {TARGET:.0%} target)")


if __name__ == "__main__":
    main(*(float(a) for a in sys.argv[1:3]), *(int(a) for a in sys.argv[3:4]))
