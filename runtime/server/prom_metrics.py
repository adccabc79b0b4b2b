"""The server's /metrics in Prometheus text format, with vLLM's metric names where they exist.

vLLM names (vllm/v1/metrics/loggers.py): vllm:num_requests_running / _waiting (gauges),
vllm:kv_cache_usage_perc and the older vllm:gpu_cache_usage_perc (a fraction 0..1 despite the
name), vllm:num_preemptions_total, vllm:prompt_tokens_total, vllm:generation_tokens_total,
vllm:request_success_total (counters), vllm:time_to_first_token_seconds,
vllm:inter_token_latency_seconds, vllm:e2e_request_latency_seconds,
vllm:request_queue_time_seconds, vllm:iteration_tokens_total (tokens per engine step)
(histograms), vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total (prompt tokens
looked up in and served from the prefix cache, counters), vllm:cache_config_info. servecap's
own block counts are servecap:kv_blocks_total / _used / _free and servecap:kv_block_size_tokens;
servecap:host_step_seconds (histogram) is the serving loop's host time per engine step outside
the step itself (taking requests in, handing tokens to the streams, publishing gauges).
"""

import bisect
import threading
from dataclasses import dataclass, field

TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                  5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                 7.5, 10.0, 20.0, 40.0, 80.0)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
HOST_STEP_BUCKETS_S = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
                       0.05, 0.1)
E2E_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    num: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.num += 1

    def lines(self, name: str, labels: str) -> list[str]:
        counts = self.counts or [0] * (len(self.buckets) + 1)
        out, cum = [], 0
        for edge, count in zip((*self.buckets, "+Inf"), counts, strict=True):
            cum += count
            out.append(f'{name}_bucket{{{labels},le="{edge}"}} {cum}')
        return out + [f"{name}_sum{{{labels}}} {self.total}",
                      f"{name}_count{{{labels}}} {self.num}"]


@dataclass
class Gauges:
    """A snapshot the engine thread publishes after every step and every queue change."""

    num_running: int = 0
    num_waiting: int = 0
    num_blocks: int = 0
    num_free_blocks: int = 0
    block_size_tokens: int = 0


class ServerMetrics:
    """Written by the engine thread, read by the /metrics handler: one lock between them."""

    def __init__(self, model_name: str) -> None:
        self.labels = f'model_name="{model_name}",engine="0"'
        self.lock = threading.Lock()
        self.gauges = Gauges()
        self.counters = {"vllm:num_preemptions_total": 0, "vllm:prompt_tokens_total": 0,
                         "vllm:generation_tokens_total": 0,
                         "vllm:prefix_cache_queries_total": 0, "vllm:prefix_cache_hits_total": 0,
                         "servecap:requests_cancelled_total": 0,
                         "servecap:requests_rejected_total": 0}
        self.success: dict[str, int] = {"length": 0, "stop": 0}
        self.histograms = {"vllm:time_to_first_token_seconds": Histogram(TTFT_BUCKETS_S),
                           "vllm:inter_token_latency_seconds": Histogram(ITL_BUCKETS_S),
                           "vllm:e2e_request_latency_seconds": Histogram(E2E_BUCKETS_S),
                           "vllm:request_queue_time_seconds": Histogram(E2E_BUCKETS_S),
                           "vllm:iteration_tokens_total": Histogram(ITERATION_TOKENS_BUCKETS),
                           "servecap:host_step_seconds": Histogram(HOST_STEP_BUCKETS_S)}

    def render(self) -> str:
        with self.lock:
            return "\n".join(self._gauge_lines() + self._counter_lines()
                             + self._histogram_lines()) + "\n"

    def _gauge_lines(self) -> list[str]:
        g, lab = self.gauges, self.labels
        used = g.num_blocks - g.num_free_blocks
        usage = used / g.num_blocks if g.num_blocks else 0.0
        rows = [("vllm:num_requests_running", g.num_running),
                ("vllm:num_requests_waiting", g.num_waiting),
                ("vllm:kv_cache_usage_perc", usage), ("vllm:gpu_cache_usage_perc", usage),
                ("servecap:kv_blocks_total", g.num_blocks),
                ("servecap:kv_blocks_used", used), ("servecap:kv_blocks_free", g.num_free_blocks),
                ("servecap:kv_block_size_tokens", g.block_size_tokens)]
        out = [f'vllm:cache_config_info{{{lab},block_size="{g.block_size_tokens}",'
               f'num_gpu_blocks="{g.num_blocks}"}} 1.0']
        for name, value in rows:
            out += [f"# TYPE {name} gauge", f"{name}{{{lab}}} {value}"]
        return out

    def _counter_lines(self) -> list[str]:
        out = []
        for name, value in self.counters.items():
            out += [f"# TYPE {name} counter", f"{name}{{{self.labels}}} {value}"]
        out.append("# TYPE vllm:request_success_total counter")
        out += [f'vllm:request_success_total{{{self.labels},finished_reason="{reason}"}} {n}'
                for reason, n in self.success.items()]
        return out

    def _histogram_lines(self) -> list[str]:
        out = []
        for name, hist in self.histograms.items():
            out += [f"# TYPE {name} histogram", *hist.lines(name, self.labels)]
        return out
