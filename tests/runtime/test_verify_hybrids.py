"""`servecap verify` on hybrids written by transformers: a Mamba-2 hybrid (Nemotron-H) and a
gated-DeltaNet hybrid (Qwen3-Next). The state pool is sized by the ledger, the fixed state in
use is exactly state_bytes_per_request x live requests, and the measured ceiling (one state
slot and the KV of one request each) is the ledger's."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.state import state_bytes_per_request
from servecap.model_configs import load_model

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from hf_reference import HYBRIDS, save_hybrid  # noqa: E402


@pytest.mark.parametrize("case", sorted(HYBRIDS))
def test_state_line_and_ceiling_reconcile_exactly(case, tmp_path) -> None:
    save_hybrid(transformers, case, tmp_path)
    result = CliRunner().invoke(app, [
        "verify", str(tmp_path), "--device", "cpu", "--device-memory", "16MiB", "--context",
        "128", "--concurrency", "4", "--max-num-batched-tokens", "512", "--output-tokens", "16",
        "--json"])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out["violations"]
    lines = {line["line"]: line for line in out["lines"]}
    per_request = state_bytes_per_request(load_model(str(tmp_path)).spec)
    assert lines["state_cache"]["predicted_bytes"] == lines["state_cache"]["measured_bytes"] \
        == 4 * per_request
    assert lines["state_pool"]["predicted_bytes"] == lines["state_pool"]["measured_bytes"] \
        == (out["predicted_ceiling_requests"] + 1) * per_request
    assert lines["kv_cache"]["predicted_bytes"] == lines["kv_cache"]["measured_bytes"]
    assert out["predicted_ceiling_requests"] == out["measured_ceiling_requests"] > 4
