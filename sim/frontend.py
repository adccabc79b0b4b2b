"""The API server's serial time per request at a run's load: one event loop takes each request
(HTTP, rendering, tokenization: frontend_s + frontend_prompt_token_s per prompt token) and
streams every running request's tokens (frontend_output_token_s each), so the more tokens it
streams per second the less of its time is left to take requests in. The same loop carries a
request's first token back out (V1, at v0.23.0: vllm/v1/engine/async_llm.py output_handler
hands each engine step's outputs to the requests' generators, which
vllm/entrypoints/openai/serving_*.py turn into SSE chunks, all on the API server's one
asyncio loop), so the request's latency outside the queue (frontend_latency_s) is stretched
by the same load."""

from dataclasses import dataclass, replace

from .config import SchedulerConfig
from .roofline import Coefficients
from .sampling import Request
from .step_model import prefill_pairs, step_s

MAX_LOAD = 0.95  # the loop never gives intake less than 5 % of its time


@dataclass(frozen=True)
class ApiServer:
    """The run's API server: its base serial time per request (frontend_s + prompt tokens),
    the output tokens per second it is expected to stream, the share of its loop that takes
    (load), the serial time per request that follows, base / (1 - load), and the request's
    latency outside the queue at that load, frontend_latency_s / (1 - load)."""

    base_s: float
    tokens_per_s: float
    load: float
    serial_s: float
    latency_s: float = 0.0

    def as_dict(self) -> dict:
        return {"serial_s_per_request_unloaded": self.base_s,
                "expected_output_tokens_per_s": self.tokens_per_s,
                "event_loop_load": self.load, "serial_s_per_request": self.serial_s,
                "latency_s_per_request": self.latency_s}


def api_server(coef: Coefficients, requests: list[Request], cfg: SchedulerConfig,
               replicas: int = 1) -> ApiServer:
    """serial = (frontend_s + frontend_prompt_token_s x mean prompt) / (1 - load), load =
    frontend_output_token_s x expected output tokens/s (at most MAX_LOAD): a processor the
    streaming shares, whose left-over time takes requests in (M/G/1 with a background load).
    The token rate is the offered one (output tokens over the arrivals' span) capped by the
    engine's capacity (expected_tokens_per_s); closed loops and bursts run at capacity.
    Replicas each run their own server, streaming their share of the tokens."""
    if not requests:
        return ApiServer(coef.frontend_s, 0.0, 0.0, coef.frontend_s, coef.frontend_latency_s)
    prompt = sum(r.prompt_tokens for r in requests) / len(requests)
    base = coef.frontend_s + coef.frontend_prompt_token_s * prompt
    if not coef.frontend_output_token_s:
        return ApiServer(base, 0.0, 0.0, base, coef.frontend_latency_s)
    rate = expected_tokens_per_s(coef, requests, cfg) / max(1, replicas)
    load = min(coef.frontend_output_token_s * rate, MAX_LOAD)
    return ApiServer(base, rate, load, base / (1.0 - load),
                     coef.frontend_latency_s / (1.0 - load))


def expected_tokens_per_s(coef: Coefficients, requests: list[Request],
                          cfg: SchedulerConfig) -> float:
    """Output tokens per second the run streams: min(offered, capacity). Capacity: B requests
    in flight (the closed loop's concurrency or every request, at most max_num_seqs) each
    costing its prefill plus its share of B-wide decode steps at half its output's context."""
    n = len(requests)
    prompt = sum(r.prompt_tokens for r in requests) / n
    output = sum(r.output_tokens for r in requests) / n
    batch = max(1, min(cfg.concurrency or n, cfg.max_num_seqs, n))
    chunk = max(1, min(int(prompt), cfg.max_num_batched_tokens))
    prefill = step_s(coef, chunk, 0, prefill_pairs(0, chunk), 0) * prompt / chunk
    decode = step_s(coef, 0, batch, 0, int(batch * (prompt + output / 2))) / batch
    capacity = output / (prefill + output * decode)
    span = max(r.arrival_s for r in requests) - min(r.arrival_s for r in requests)
    if cfg.concurrency is not None or span <= 0:
        return capacity
    return min(capacity, output * n / span)


def with_api_server(coef: Coefficients, requests: list[Request], cfg: SchedulerConfig,
                    replicas: int = 1) -> tuple[Coefficients, ApiServer]:
    """coef with frontend_s and frontend_latency_s replaced by the run's serial time and
    latency per request at its load (what the simulator's API-server queue charges each
    request, and the time in transit it adds), and their parts."""
    server = api_server(coef, requests, cfg, replicas)
    return replace(coef, frontend_s=server.serial_s,
                   frontend_latency_s=server.latency_s), server
