"""Poll a Prometheus /metrics endpoint during a run: requests running and waiting, KV usage,
the prefix cache's counters (prompt tokens queried and hit), and the sums and counts of the
latency histograms the calibration reads (HISTOGRAMS)."""

import asyncio
import math
import time

import aiohttp

MAX_METRICS_BYTES = 16 * 2**20  # more of a /metrics body than this is not read
GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
          "vllm:kv_cache_usage_perc": "kv_usage", "vllm:gpu_cache_usage_perc": "kv_usage",
          # counters (vLLM V1; the gpu_ names are its releases before 0.10)
          "vllm:prefix_cache_queries_total": "prefix_queries",
          "vllm:gpu_prefix_cache_queries_total": "prefix_queries",
          "vllm:prefix_cache_hits_total": "prefix_hits",
          "vllm:gpu_prefix_cache_hits_total": "prefix_hits"}

# vLLM's (vllm/v1/metrics/loggers.py) and servecap serve's own (runtime/server/prom_metrics.py)
HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:request_queue_time_seconds",
              "vllm:iteration_tokens_total", "servecap:host_step_seconds")


def parse_metrics(text: str) -> dict:
    """{'running', 'waiting', 'kv_usage' (0..1), 'num_gpu_blocks', 'block_size',
    'prefix_queries', 'prefix_hits', and NAME_sum / NAME_count of each of HISTOGRAMS} as found;
    gauges with several label sets (engines) are summed, usage averaged. A line that is not
    `name{labels} value` (blank, cut short, a value that is no number) is skipped."""
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        sample = _sample_line(line)
        if sample is None:
            continue
        name, labels, value = sample
        if name in GAUGES:
            found.setdefault(GAUGES[name], []).append(value)
        elif name.rpartition("_")[0] in HISTOGRAMS and name.endswith(("_sum", "_count")):
            found.setdefault(name, []).append(value)
        elif name == "vllm:cache_config_info":
            for key in ("num_gpu_blocks", "block_size"):
                text_value = _label(labels, key)
                if text_value and text_value.isdigit():
                    found.setdefault(key, []).append(float(text_value))
    out = {k: sum(v) for k, v in found.items()}
    if "kv_usage" in found:
        out["kv_usage"] = sum(found["kv_usage"]) / len(found["kv_usage"])
    return out


def _sample_line(line: str) -> tuple[str, str, float] | None:
    """(name, labels, value) of a Prometheus sample line, or None for anything else."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    if "{" in line:
        name, _, rest = line.partition("{")
        labels, brace, value = rest.rpartition("}")
        if not brace:
            return None
    else:
        name, _, value = line.partition(" ")
        labels = ""
    fields = value.split()
    try:
        number = float(fields[0]) if fields else math.nan
    except ValueError:
        return None
    return (name.strip(), labels, number) if math.isfinite(number) else None


def _label(labels: str, key: str) -> str | None:
    marker = f'{key}="'
    at = labels.find(marker)
    return None if at < 0 else labels[at + len(marker):labels.find('"', at + len(marker))]


class Scraper:
    def __init__(self, url: str, interval_s: float = 0.25) -> None:
        self.url, self.interval_s = url, interval_s
        self.samples: list[dict] = []
        self.num_failures = 0
        self.last_error = ""
        self.first = asyncio.Event()  # set once the first scrape has answered or failed

    async def run(self, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while not stop.is_set():
                await self._sample(session)
                self.first.set()
                try:
                    await asyncio.wait_for(stop.wait(), self.interval_s)
                except TimeoutError:
                    pass
            await self._sample(session)  # the counters once the last request has answered

    async def _sample(self, session: aiohttp.ClientSession) -> None:
        try:
            async with session.get(self.url) as resp:
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                text = (await resp.content.read(MAX_METRICS_BYTES)).decode("utf-8", "replace")
                self.samples.append({"time": time.perf_counter()} | parse_metrics(text))
        except Exception as exc:  # a scrape that fails is counted; the run goes on
            self.num_failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"

    def summary(self) -> dict:
        """Peaks over the run; KV tokens in use = usage x blocks x block size."""
        def peak(key):
            values = [s[key] for s in self.samples if key in s]
            return max(values) if values else None
        usage, blocks, bsz = peak("kv_usage"), peak("num_gpu_blocks"), peak("block_size")
        tokens = round(usage * blocks * bsz) if None not in (usage, blocks, bsz) else None
        return {"url": self.url, "num_samples": len(self.samples),
                **self._prefix_cache(),
                "num_failures": self.num_failures, "last_error": self.last_error,
                "peak_running": peak("running"), "peak_waiting": peak("waiting"),
                "peak_kv_usage": usage, "num_gpu_blocks": blocks, "block_size_tokens": bsz,
                "peak_kv_tokens_in_use": tokens,
                "kv_capacity_tokens": None if None in (blocks, bsz) else int(blocks * bsz),
                "histograms": self._histograms()}

    def _histograms(self) -> dict:
        """{name: {"sum", "count"}}: each of HISTOGRAMS' rise over the run (first sample to
        last), for those the server has."""
        out = {}
        for name in HISTOGRAMS:
            rows = [s for s in self.samples if f"{name}_sum" in s and f"{name}_count" in s]
            if len(rows) >= 2:
                out[name] = {"sum": rows[-1][f"{name}_sum"] - rows[0][f"{name}_sum"],
                             "count": round(rows[-1][f"{name}_count"]
                                            - rows[0][f"{name}_count"])}
        return out

    def _prefix_cache(self) -> dict:
        """Prompt tokens the server looked up in its prefix cache over the run, and those it
        found (the counters' rise from the first sample to the last)."""
        def rise(key):
            values = [s[key] for s in self.samples if key in s]
            return round(values[-1] - values[0]) if len(values) >= 2 else None
        queried, hit = rise("prefix_queries"), rise("prefix_hits")
        return {"prefix_cache_queried_tokens": queried, "prefix_cache_hit_tokens": hit,
                "prefix_cache_hit_share": hit / queried if queried and hit is not None
                else None}
