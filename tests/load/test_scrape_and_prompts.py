"""The load client's pure parts: Prometheus parsing and seeded token-id prompts."""

from servecap.load.scrape import parse_metrics
from servecap.load.synth import prompt_ids
from servecap.sim.sampling import Request

VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1.0
vllm:generation_tokens_total{engine="0",model_name="m"} 123.0
"""


def test_vllm_metrics_text_is_read_and_engines_summed():
    got = parse_metrics(VLLM_TEXT)
    assert got == {"running": 5.0, "waiting": 7.0, "kv_usage": 0.25,
                   "num_gpu_blocks": 1000.0, "block_size": 16.0}


def test_prompts_have_the_requested_length_and_share_their_group_prefix():
    a = Request(0, 0.0, 50, 4, prefix_group="sys", prefix_tokens=20)
    b = Request(1, 0.1, 30, 4, prefix_group="sys", prefix_tokens=20)
    ids_a, ids_b = prompt_ids(a, 256, 0), prompt_ids(b, 256, 0)
    assert len(ids_a) == 50 and len(ids_b) == 30 and ids_a[:20] == ids_b[:20]
    assert ids_a[20:30] != ids_b[20:30] and max(ids_a + ids_b) < 256
    assert prompt_ids(a, 256, 0) == ids_a and prompt_ids(a, 256, 1) != ids_a


def test_plan_imports_neither_the_server_nor_the_client_stack():
    import subprocess
    import sys

    probe = ("import sys; from typer.testing import CliRunner; from servecap.cli.app import app;"
             " CliRunner().invoke(app, ['plan', 'teaching-7b', '--json']);"
             " print(sorted(m for m in ('fastapi', 'uvicorn', 'aiohttp', 'tokenizers', 'openai')"
             " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_prefix_cache_counters_are_read_in_both_vllm_spellings():
    """vLLM V1's vllm:prefix_cache_queries/hits (counters, so `_total` on the wire) and the
    gpu_-prefixed names of its releases before 0.10; engines are summed."""
    text = ('vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0\n'
            'vllm:prefix_cache_queries_total{engine="1",model_name="m"} 500.0\n'
            'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 640.0\n')
    assert parse_metrics(text) == {"prefix_queries": 1500.0, "prefix_hits": 640.0}
    old = 'vllm:gpu_prefix_cache_hits_total{model_name="m"} 3.0\n'
    assert parse_metrics(old) == {"prefix_hits": 3.0}
