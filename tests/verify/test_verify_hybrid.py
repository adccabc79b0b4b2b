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

DIMS = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=256, max_position_embeddings=256)
CASES = {
    "nemotron_h": ("NemotronHForCausalLM", "NemotronHConfig", dict(
        hybrid_override_pattern="M*-M-", mamba_num_heads=4, mamba_head_dim=16, n_groups=2,
        ssm_state_size=16, conv_kernel=4, chunk_size=8, num_nextn_predict_layers=0)),
    "qwen3_next": ("Qwen3NextForCausalLM", "Qwen3NextConfig", dict(
        num_hidden_layers=4, full_attention_interval=2, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
        linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32,
        mlp_only_layers=[0, 1, 2, 3])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_line_and_ceiling_reconcile_exactly(case, tmp_path) -> None:
    arch, config_class, extra = CASES[case]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**DIMS, **extra)
    getattr(transformers, arch)(config).float().save_pretrained(tmp_path)
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
