"""`servecap verify DIR --device cpu --device-memory 32MiB` on the five MoE checkpoints written by
transformers (Mixtral, Qwen3-MoE, DeepSeek-V3, Qwen3-Next, gpt-oss): exit 0, the weights and
pools exact, the KV and runtime-peak lines within the ledger's, the measured ceiling the
ledger's, and the hybrid's fixed state in use exactly the ledger's per-request state."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.state import state_bytes_per_request
from servecap.model_configs import load_model

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from moe_checkpoints import MOE, save_moe  # noqa: E402

EXACT = ("weights", "weight_metadata", "kv_pool", "state_pool")


@pytest.mark.parametrize("case", sorted(MOE))
def test_verify_reconciles_every_line(case, tmp_path) -> None:
    torch.set_num_threads(1)
    save_moe(transformers, case, tmp_path)
    result = CliRunner().invoke(app, ["verify", str(tmp_path), "--device", "cpu",
                                      "--device-memory", "32MiB", "--json"])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out["violations"]
    lines = {line["line"]: line for line in out["lines"]}
    assert all(line["verdict"] in ("ok", "reported") for line in out["lines"])
    for name in EXACT:
        if name in lines:
            assert lines[name]["predicted_bytes"] == lines[name]["measured_bytes"]
    assert 0 < lines["runtime_peak"]["measured_bytes"] <= lines["runtime_peak"]["predicted_bytes"]
    assert lines["kv_cache"]["measured_bytes"] == lines["kv_cache"]["predicted_bytes"]
    assert out["predicted_ceiling_requests"] == out["measured_ceiling_requests"] > 1
    spec = load_model(str(tmp_path)).spec
    if spec.state_layers:  # Qwen3-Next: one state slot per live request, to the byte
        live = out["record"]["concurrency"]
        assert lines["state_cache"]["measured_bytes"] == live * state_bytes_per_request(spec)
        assert lines["state_cache"]["predicted_bytes"] == lines["state_cache"]["measured_bytes"]


def test_tensor_parallel_moe_is_refused_in_one_line(tmp_path) -> None:
    save_moe(transformers, "gpt_oss", tmp_path)
    result = CliRunner().invoke(app, ["verify", str(tmp_path), "--device", "cpu",
                                      "--device-memory", "32MiB", "-tp", "2"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "servecap: error: tensor_parallel_size = 2: the runtime runs gpt_oss's experts and "
        "attention sinks on one device only (1) yet"]
