"""/metrics speaks Prometheus text with vLLM's names, and its counters follow the requests."""

import json
import urllib.request

VLLM_NAMES = ("vllm:num_requests_running", "vllm:num_requests_waiting",
              "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
              "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_bucket",
              "vllm:inter_token_latency_seconds_bucket", "vllm:generation_tokens_total",
              "vllm:cache_config_info")


def _metrics(server) -> list[str]:
    with urllib.request.urlopen(server.url + "/metrics", timeout=5) as resp:
        assert resp.headers["content-type"].startswith("text/plain")
        return resp.read().decode().splitlines()


def _complete(server, max_tokens: int, prompt: list[int] = (3, 4, 5)) -> dict:
    body = json.dumps({"model": "tiny-llama", "prompt": list(prompt), "max_tokens": max_tokens,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(server.url + "/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_vllm_metric_names_are_exposed(server):
    names = {line.split("{")[0] for line in _metrics(server) if not line.startswith("#")}
    assert set(VLLM_NAMES) <= names


def test_counters_and_histograms_follow_a_request(server):
    before = server.metric("vllm:generation_tokens_total")
    ttft_before = server.metric("vllm:time_to_first_token_seconds_count")
    assert _complete(server, 11)["usage"]["completion_tokens"] == 11
    assert server.metric("vllm:generation_tokens_total") == before + 11
    assert server.metric("vllm:time_to_first_token_seconds_count") == ttft_before + 1
    buckets = [float(line.rsplit(" ", 1)[1]) for line in _metrics(server)
               if line.startswith("vllm:inter_token_latency_seconds_bucket")]
    assert buckets == sorted(buckets) and buckets[-1] >= 10  # cumulative, +Inf holds all gaps
    assert 0 <= server.metric("vllm:kv_cache_usage_perc") <= 1


def test_a_repeated_prompt_reports_its_cached_tokens_in_usage_and_metrics(server):
    """usage.prompt_tokens_details.cached_tokens and vLLM's prefix_cache_queries/hits: the
    second send of a 40-token prompt finds its full 16-token blocks in the prefix cache."""
    prompt = [(7 * i + 11) % 200 for i in range(40)]
    queries = server.metric("vllm:prefix_cache_queries_total")
    hits = server.metric("vllm:prefix_cache_hits_total")
    first = _complete(server, 2, prompt)["usage"]
    second = _complete(server, 2, prompt)["usage"]
    assert first["prompt_tokens"] == second["prompt_tokens"] == 40
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert 32 <= second["prompt_tokens_details"]["cached_tokens"] < 40
    assert server.metric("vllm:prefix_cache_queries_total") == queries + 80
    assert server.metric("vllm:prefix_cache_hits_total") == \
        hits + second["prompt_tokens_details"]["cached_tokens"]
    assert server.metric("vllm:iteration_tokens_total_count") >= 2
