"""--kv-offloading-size on a pasted vLLM line: the host tier is a host line (not device
memory), plan --json's kv_offload, checked against public figures
(tests/fixtures/kv_offload/SOURCE.md); bad input is one line, exit 2."""

import json
import re
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QWEN3_8B = FIXTURES / "configs" / "Qwen--Qwen3-8B" / "config.json"


def _plan(run, *line):
    result = run("plan", "--device", "h100-80gb", "--json", "--", "vllm", "serve", *line)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_lmcache_issue_2901_figure(run):
    """TP 1, 50 GB of LMCache's CPU tier: 409,600 tokens, 50 GiB on the rank."""
    text = (FIXTURES / "kv_offload" / "lmcache_2901.txt").read_text()
    tokens = int(re.search(r"^1 \| 50GB \| 50GB \| ([\d,]+)", text, re.M)[1].replace(",", ""))
    result = run("plan", "--device", "h100-80gb", "--engine", "vllm==0.19", "--json", "--",
                 "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                 "--kv-offloading-size", "50", "--kv-offloading-backend", "lmcache")
    assert result.exit_code == 0, result.output
    tier = json.loads(result.stdout)["kv_offload"]
    assert tier["tokens"] == tokens == 409_600
    assert tier["bytes_per_rank"] == 50 * 2**30


def test_lmcache_chunk_is_the_logged_kv_shape(run):
    """LMCache-Ascend #184: Qwen3-8B at TP 2 logs kv_shape=(36, 2, 256, 4, 128), bf16."""
    text = (FIXTURES / "kv_offload" / "lmcache_ascend_184.txt").read_text()
    shape = [int(n) for n in re.search(r"kv_shape=\(([\d, ]+)\)", text)[1].split(",")]
    result = run("plan", "--device", "h100-80gb", "--engine", "vllm==0.19", "--json", "--",
                 "vllm", "serve", QWEN3_8B, "-tp", "2", "--max-model-len", "8192",
                 "--kv-offloading-size", "16", "--kv-offloading-backend", "lmcache")
    assert result.exit_code == 0, result.output
    tier = json.loads(result.stdout)["kv_offload"]
    chunk = shape[0] * shape[1] * shape[2] * shape[3] * shape[4] * 2
    assert tier["chunk_bytes"] == chunk and tier["chunk_tokens"] == shape[2]
    assert tier["bytes_per_rank"] == 8 * 2**30


def test_native_tier_is_a_host_line_and_leaves_the_device_alone(run):
    base = _plan(run, "llama-3.1-8b", "--max-model-len", "8192")
    line = _plan(run, "llama-3.1-8b", "--max-model-len", "8192", "--kv-offloading-size", "64",
                 "--kv-offloading-backend", "native")
    tier = line["kv_offload"]
    assert base["kv_offload"] is None
    assert set(tier) >= {"tier", "bytes_per_rank", "tokens"} and tier["tier"] == "cpu"
    assert tier["tokens"] == 64 * 2**30 // (131_072 * 16) * 16
    host = next(item for item in line["host_lines"] if item["key"] == "kv_offload")
    assert host["bytes"] == tier["bytes_per_rank"] and "64 GiB" in host["from"]
    assert f"{tier['tokens']:,} tokens" in host["from"]
    assert line["committed_bytes"] == base["committed_bytes"]


def test_the_table_shows_the_host_line(run):
    result = run("plan", "--device", "h100-80gb", "--", "vllm", "serve", "llama-3.1-8b",
                 "--max-model-len", "8192", "--kv-offloading-size", "64")
    assert result.exit_code == 0, result.output
    assert "host memory (not the device): KV offload tier (CPU)" in result.output


def test_diff_shows_the_offload_line(run):
    """The same line under v0.19 and v0.33: the tier's host bytes and tokens side by side."""
    result = run("diff", "--device", "h100-80gb", "--engine", "vllm==0.19", "--against",
                 "vllm==0.33", "--json", "--", "vllm", "serve", "llama-3.1-8b",
                 "--max-model-len", "8192", "--kv-offloading-size", "64")
    assert result.exit_code in (0, 1), result.output
    found = json.dumps(json.loads(result.stdout))
    assert "kv_offload_tokens" in found and "KV offload tier (CPU) (host memory)" in found
    table = run("diff", "--device", "h100-80gb", "--engine", "vllm==0.19", "--against",
                "vllm==0.33", "--", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "8192",
                "--kv-offloading-size", "64")
    assert "KV offload tier" in table.output, table.output


@pytest.mark.parametrize(("extra", "needle"), [
    (("--kv-offloading-size", "0"), "a number of GiB > 0"),
    (("--kv-offloading-size", "lots"), "a number of GiB > 0"),
    (("--kv-offloading-backend", "lmcache"), "applies with --kv-offloading-size"),
    (("--kv-offloading-size", "8", "--kv-offloading-backend", "disk"), "native or lmcache"),
    (("--kv-offloading-size", "8", "--kv-offloading-backend", "lmcache"),
     "capacity is the server's"),
])
def test_bad_input_is_one_line(run, extra, needle):
    result = run("plan", "--device", "h100-80gb", "--", "vllm", "serve", "llama-3.1-8b",
                 "--max-model-len", "8192", *extra)
    assert result.exit_code == 2, result.output
    assert "\n" not in result.stderr.strip() and needle in result.stderr


@pytest.mark.parametrize(("tp", "ranks"), [("1", "over 1 rank:"), ("2", "over 2 ranks:")])
def test_the_tiers_arithmetic_counts_its_ranks_in_words(run, tp, ranks):
    """It read 'over 1 rank(s)'."""
    line = _plan(run, "llama-3.1-8b", "--max-model-len", "8192", "--kv-offloading-size", "64",
                 "-tp", tp)
    host = next(item for item in line["host_lines"] if item["key"] == "kv_offload")
    assert ranks in host["from"] and "(s)" not in host["from"], host["from"]
