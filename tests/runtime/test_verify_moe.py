"""`servecap verify DIR --device cpu --device-memory 32MiB` on the five MoE checkpoints written by
transformers (Mixtral, Qwen3-MoE, DeepSeek-V3, Qwen3-Next, gpt-oss): exit 0, the weights and
pools exact, the KV and runtime-peak lines within the ledger's, the measured ceiling the
ledger's, and the hybrid's fixed state in use exactly the ledger's per-request state."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.kv import Shard
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
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


def test_two_ranks_reconcile_their_expert_shards(tmp_path) -> None:
    """--tensor-parallel-size 2 on gloo: each rank holds half of every expert's columns, of
    the shared expert and of the latent attention's heads (the latent whole), and its weights,
    pool and ceiling reconcile on its own 32 MiB device."""
    save_moe(transformers, "deepseek_v3", tmp_path)
    result = CliRunner().invoke(app, [
        "verify", str(tmp_path), "--device", "cpu", "--device-memory", "32MiB",
        "--runtime-peak", "26MiB", "--context", "64", "--concurrency", "4", "--output-tokens",
        "8", "-tp", "2", "--json"])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out["violations"]
    for rank in out["ranks"]:
        lines = {line["line"]: line for line in rank["lines"]}
        for name in ("weights", "kv_pool", "kv_cache"):
            assert lines[name]["predicted_bytes"] == lines[name]["measured_bytes"]
        assert rank["predicted_ceiling_requests"] == rank["measured_ceiling_requests"]
    serve = ServeSpec(device_bytes=1 << 30, context_tokens=64, concurrency=1,
                      weight_dtype="fp32", activation_dtype="fp32", runtime_peak_bytes=0)
    spec = load_model(str(tmp_path)).spec
    whole = build_plan(spec, serve).line("weights")
    shard = build_plan(spec, serve, shard=Shard(2)).line("weights")
    assert whole // 2 < shard < whole  # the experts, heads and vocabulary split
    assert [{line["line"]: line["measured_bytes"] for line in rank["lines"]}["weights"]
            for rank in out["ranks"]] == [shard, shard]
