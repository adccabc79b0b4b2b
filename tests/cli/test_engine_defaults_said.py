"""An engine's budget fraction that no flag gave is called its default: the pool's line read
'x mem_fraction_static 0.88' (SGLang's default at one GPU), 'free_gpu_memory_fraction 0.90'
and 'gpu_memory_utilization 0.92' exactly as if they had been given."""

import json

import pytest

CASES = [("vllm", "--gpu-memory-utilization", "0.8", "gpu_memory_utilization 0.92 (its default)",
          "gpu_memory_utilization 0.80 -"),
         ("sglang", "--mem-fraction-static", "0.8",
          "mem_fraction_static 0.88 (its default at tp x pp = 1)", "mem_fraction_static 0.80 -"),
         ("trtllm", "--free-gpu-memory-fraction", "0.8",
          "free_gpu_memory_fraction 0.90 (its default)", "free_gpu_memory_fraction 0.80 x")]


def _how(run, engine: str, *flags: str) -> str:
    result = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--context", "8192",
                 "--engine", engine, *flags, "--json")
    assert result.exit_code == 0, result.output
    lines = {line["key"]: line["from"] for line in json.loads(result.stdout)["lines"]}
    return lines["kv_pool_spare"]


@pytest.mark.parametrize(("engine", "flag", "value", "default", "given"), CASES)
def test_the_fraction_says_when_it_is_the_default(run, engine, flag, value, default,
                                                  given) -> None:
    assert default in _how(run, engine)
    assert given in _how(run, engine, flag, value)
    assert "default" not in _how(run, engine, flag, value)
