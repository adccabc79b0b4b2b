"""The run's own load through the simulator, priced with the run's coefficients: simulated vs
measured latency percentiles, so the simulation can be checked against the device."""

from servecap.ledger.plan import Plan

from .sequence import Arrival

METRICS = ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
TOLERANCE_SHARE = 0.25  # simulated within 25 % of measured ...
TOLERANCE_FLOOR_MS = 1.0  # ... or within 1 ms, for figures near zero (an empty queue)


def simulated_vs_measured(plan: Plan, arrivals: tuple[Arrival, ...], realtime: bool,
                          coefficients: dict, num_blocks: int, measured: dict,
                          underdetermined: dict | None = None) -> dict | None:
    """{metric: {simulated: {p50, p95}, measured: {p50, p95}}} under the simulator's
    chunked-prefill policy with the engine's knobs, no watermark; None when the simulator is
    not installed or the run gave no bandwidth and FLOP rate to price steps with. When the
    fit could not pin a rate, no prediction: {"verdict": "underdetermined", "underdetermined":
    {rate: why}}."""
    if underdetermined:
        return {"policy": "chunked-prefill", "verdict": "underdetermined",
                "underdetermined": dict(underdetermined)}
    try:
        from servecap.sim.config import SchedulerConfig
        from servecap.sim.metrics import summarize
        from servecap.sim.roofline import coefficients_for_plan, override
        from servecap.sim.run import simulate
        from servecap.sim.sampling import Request
    except ImportError:
        return None
    if "bandwidth_bytes_per_s" not in coefficients or "flops_per_s" not in coefficients:
        return None
    serve = plan.serve
    coef = override(coefficients_for_plan(plan, 1.0, 1.0), coefficients, "servecap verify")
    config = SchedulerConfig(policy="chunked-prefill",
                             max_num_batched_tokens=serve.max_num_batched_tokens,
                             max_num_seqs=min(serve.max_num_seqs, serve.max_num_batched_tokens),
                             block_size_tokens=serve.block_size_tokens, watermark=0.0)
    requests = [Request(request_id=i, arrival_s=a.arrival_s if realtime else 0.0,
                        prompt_tokens=_count(a.prompt_tokens), output_tokens=a.output_tokens)
                for i, a in enumerate(arrivals)]
    report = summarize(simulate(requests, coef, config, num_blocks))
    return with_verdicts({"policy": "chunked-prefill", **{
        m: {"simulated": _p50_p95(report[m]), "measured": _p50_p95(measured[m])}
        for m in METRICS}})


def with_verdicts(check: dict) -> dict:
    """Each metric's verdict, "agrees" when both simulated percentiles are within
    TOLERANCE_SHARE of the measured ones or within TOLERANCE_FLOOR_MS, "disagrees" otherwise,
    "n/a" when a percentile is missing; the check's own verdict is "disagrees" when any
    metric disagrees. Informational: verify's exit code does not depend on it."""
    out = dict(check)
    for m in METRICS:
        if m in out:
            out[m] = out[m] | {"verdict": _verdict(out[m]["simulated"], out[m]["measured"])}
    verdicts = {out[m]["verdict"] for m in METRICS if m in out} - {"n/a"}
    out["tolerance"] = {"share": TOLERANCE_SHARE, "floor_ms": TOLERANCE_FLOOR_MS}
    out["verdict"] = "disagrees" if "disagrees" in verdicts else \
        "agrees" if verdicts else "n/a"
    return out


def _verdict(simulated: dict, measured: dict) -> str:
    pairs = [(simulated.get(p), measured.get(p)) for p in ("p50", "p95")]
    if any(s is None or m is None for s, m in pairs):
        return "n/a"
    within = all(abs(s - m) <= max(TOLERANCE_SHARE * abs(m), TOLERANCE_FLOOR_MS)
                 for s, m in pairs)
    return "agrees" if within else "disagrees"


def _count(prompt: tuple[int, ...] | int) -> int:
    return prompt if isinstance(prompt, int) else len(prompt)


def _p50_p95(summary: dict) -> dict:
    return {"p50": summary.get("p50"), "p95": summary.get("p95")}
