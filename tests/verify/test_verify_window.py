"""`servecap verify` on a model whose every layer is windowed: the runtime frees out-of-window
blocks, so the ledger's windowed KV line (paging.window_blocks) is the measured one."""

import json
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app

TINY_LLAMA = Path(__file__).parents[2] / "model_configs" / "tiny-llama.yaml"
BLOCK_BYTES = 512 * 16  # 2 layers x 2 [K,V] x 2 heads x 16 dims x fp32, 16-token blocks


def _tiny_mistral(tmp_path: Path) -> Path:
    """tiny-llama with a 16-token sliding window on both layers (Mistral-7B v0.1 style)."""
    text = TINY_LLAMA.read_text().replace("name: tiny-llama", "name: tiny-mistral")
    text = text.replace("model_type: llama", "model_type: mistral")
    text = text.replace("LlamaForCausalLM", "MistralForCausalLM")
    path = tmp_path / "tiny-mistral.yaml"
    path.write_text(text + "sliding_window: 16\n")
    return path


def test_windowed_kv_in_use_and_ceiling_reconcile_exactly(tmp_path) -> None:
    """4 requests of 256 tokens decoding from a 1-token prompt: each holds 1 + ceil(15/16) = 2
    blocks of its window (the runtime used to keep all 16), and 127 such requests fit."""
    result = CliRunner().invoke(app, ["verify", str(_tiny_mistral(tmp_path)), "--device", "cpu",
                                      "--output-tokens", "255", "--json"])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out["violations"]
    kv = next(line for line in out["lines"] if line["line"] == "kv_cache")
    assert kv["predicted_bytes"] == kv["measured_bytes"] == 4 * 2 * BLOCK_BYTES
    assert out["predicted_ceiling_requests"] == out["measured_ceiling_requests"] == 127
