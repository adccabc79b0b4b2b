"""The server's time outside its engine step, from its /metrics histograms against the
client's TTFTs, in the Coefficients names sim/vllm_engine.py gives those terms.

- cpu_step_s, the host's time per step: the mean of servecap:host_step_seconds (the serving
  loop's time per step outside engine.step(): taking requests in, handing tokens to the
  streams). A server without that histogram (vLLM) leaves it inside the step model's
  step_overhead_s, said so.
- frontend_s, the API server's time per request (HTTP, tokenization, the hop to the engine
  and the first token's way back; the simulator queues requests through it one at a time):
  the client's mean TTFT less the server's (vllm:time_to_first_token_seconds, from when the
  engine got the request to its first token) and less cpu_step_s (the first token's hand-off
  is in the step's host time, which the simulator adds to every step).
- What each first-token sample must lose to be its prefill step alone: frontend_s,
  cpu_step_s and the mean wait for admission (vllm:request_queue_time_seconds, which the
  simulator queues for itself); each decode sample loses cpu_step_s.
Means over the run: the server reports no per-request times, so each sample loses the mean.
"""

TTFT = "vllm:time_to_first_token_seconds"
QUEUE = "vllm:request_queue_time_seconds"
HOST = "servecap:host_step_seconds"


def _mean(histograms: dict, name: str) -> float | None:
    hist = histograms.get(name) or {}
    count = hist.get("count") or 0
    return hist["sum"] / count if count > 0 else None


def server_terms(client_ttfts_s: list[float], histograms: dict | None) -> dict:
    """{"coefficients": {frontend_s, cpu_step_s as fitted}, "first_token_offset_s",
    "decode_offset_s", "not_fitted": {name: why}, "measured": {the means used, s}}."""
    histograms = histograms or {}
    out = {"coefficients": {}, "first_token_offset_s": 0.0, "decode_offset_s": 0.0,
           "not_fitted": {}, "measured": {}}
    if not histograms:
        why = "no /metrics histograms (give --metrics URL): inside the fitted step model"
        out["not_fitted"] = {"frontend_s": why, "cpu_step_s": why}
        return out
    host = _mean(histograms, HOST)
    if host is None:
        out["not_fitted"]["cpu_step_s"] = f"the server has no {HOST}: inside step_overhead_s"
    else:
        out["coefficients"]["cpu_step_s"] = host
        out["decode_offset_s"] = host
        out["measured"]["host_step_mean_s"] = host
    server_ttft, queue = _mean(histograms, TTFT), _mean(histograms, QUEUE)
    if server_ttft is None or not client_ttfts_s:
        out["not_fitted"]["frontend_s"] = f"the server reported no {TTFT}"
        return out
    client = sum(client_ttfts_s) / len(client_ttfts_s)
    out["measured"] |= {"client_ttft_mean_s": client, "server_ttft_mean_s": server_ttft,
                        "server_queue_mean_s": queue}
    frontend = client - server_ttft - (host or 0.0)
    if frontend <= 0:
        out["not_fitted"]["frontend_s"] = f"the client's mean TTFT ({client * 1e3:.3g} ms) " \
            f"is not above the server's ({server_ttft * 1e3:.3g} ms) and its host time"
        return out
    out["coefficients"]["frontend_s"] = frontend
    out["first_token_offset_s"] = client - server_ttft + (queue or 0.0)
    return out
