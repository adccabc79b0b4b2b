"""`servecap verify` on a model whose every layer is windowed: the runtime allocates a prompt's
blocks chunk by chunk and frees the out-of-window ones before each step's allocation, so the
ledger's windowed KV line reconciles exactly: the in-flight prefill peak for prompts longer
than the window, the steady decode hold for prompts that fit it."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

BLOCK_BYTES = 512 * 16  # 2 layers x 2 [K,V] x 2 heads x 16 dims x fp32, 16-token blocks
LOAD = ["--device", "cpu", "--device-memory", "32MiB", "--context", "128", "--concurrency", "4",
        "--max-num-batched-tokens", "512", "--json"]


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """A Mistral checkpoint written by transformers, both layers windowed (16 tokens)."""
    directory = tmp_path_factory.mktemp("mistral-window-16")
    torch.manual_seed(0)
    config = transformers.MistralConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=256,
        sliding_window=16)
    transformers.MistralForCausalLM(config).float().save_pretrained(directory)
    return directory


def _verify(directory, *flags: str) -> dict:
    result = CliRunner().invoke(app, ["verify", str(directory), *LOAD, *flags])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out["violations"]
    return out


def _kv(out: dict) -> dict:
    return next(line for line in out["lines"] if line["line"] == "kv_cache")


def test_prompts_longer_than_the_window_hold_their_prefill_in_flight(mistral) -> None:
    """4 prompts of 112 tokens prefill in one 512-token step, each holding its 7 blocks (the
    runtime used to keep them through decode too): exactly the ledger's in-flight figure for
    that load. The plan's line counts prompts of the whole 128-token context (8 blocks, vLLM's
    SlidingWindowSpec capped at the request), and its ceiling, 8 blocks a request, is measured."""
    out = _verify(mistral, "--output-tokens", "16")
    kv = _kv(out)
    assert kv["predicted_bytes"] == kv["measured_bytes"] == 4 * 7 * BLOCK_BYTES
    assert "262,144 B" in kv["detail"]  # the plan's line: 4 x 8 blocks
    assert out["predicted_ceiling_requests"] == out["measured_ceiling_requests"]
    pool = next(line for line in out["lines"] if line["line"] == "kv_pool")["measured_bytes"]
    assert out["predicted_ceiling_requests"] == (pool // BLOCK_BYTES - 1) // 8


def test_prompts_that_fit_the_window_leave_the_decode_hold(mistral) -> None:
    """1-token prompts decoding to 128 tokens: each request holds 1 + ceil(15/16) = 2 blocks."""
    out = _verify(mistral, "--output-tokens", "127", "--no-probe")
    kv = _kv(out)
    assert kv["predicted_bytes"] == kv["measured_bytes"] == 4 * 2 * BLOCK_BYTES
