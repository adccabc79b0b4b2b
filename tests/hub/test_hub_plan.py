"""`servecap plan ORG/NAME` against a Hub served from this process: exact weight bytes from the
safetensors headers, only headers downloaded, the cache serving HF_HUB_OFFLINE=1, revisions."""

import json

import numpy as np
import pytest
from safetensors.numpy import save

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "vocab_size": 4096, "torch_dtype": "bfloat16",
          "max_position_embeddings": 256}
SHARD_1 = {"model.embed_tokens.weight": np.ones((4096, 64), np.float16),
           "model.layers.0.mlp.down_proj.qweight": np.ones((16, 64), np.int32),
           "model.layers.0.mlp.down_proj.scales": np.ones((1, 64), np.float16)}
SHARD_2 = {"lm_head.weight": np.ones((4096, 64), np.float16),
           "model.norm.weight": np.ones((64,), np.float32)}


def nbytes(tensors: dict, metadata: bool = False) -> int:
    return sum(a.nbytes for k, a in tensors.items() if k.endswith("scales") == metadata)


def sharded_repo() -> dict[str, bytes]:
    names = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    index = {"metadata": {"total_size": 1}, "weight_map": {
        **{k: names[0] for k in SHARD_1}, **{k: names[1] for k in SHARD_2}}}
    return {"config.json": json.dumps(CONFIG).encode(), "README.md": b"# tiny",
            "model.safetensors.index.json": json.dumps(index).encode(),
            names[0]: save(SHARD_1), names[1]: save(SHARD_2)}


def plan_json(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_sharded_repo_plans_from_headers_exactly_and_fetches_only_headers(hub, servecap):
    files = sharded_repo()
    sha = hub.add("acme/tiny", files)
    result = servecap("plan", "acme/tiny", "--device", "1GiB", "--json", "-v")
    data = plan_json(result)
    assert data["weights_bytes"] == nbytes(SHARD_1) + nbytes(SHARD_2)
    assert data["weight_metadata_bytes"] == nbytes(SHARD_1, metadata=True)
    assert "safetensors headers: 5 tensors in 2 file(s)" in data["lines"][0]["from"]
    assert data["model_revision_sha"] == sha and data["hub"]["sha"] == sha
    assert data["model_source"] == f"{hub.url}/acme/tiny at commit {sha}"
    weight_files = sum(len(c) for f, c in files.items() if f.endswith(".safetensors"))
    served = hub.served_bytes(".safetensors")
    assert served == sum(8 + int.from_bytes(c[:8], "little")
                         for f, c in files.items() if f.endswith(".safetensors"))
    assert served * 50 < weight_files  # headers only: ~1 KB of ~1 MB
    assert sum(r.startswith("GET /cdn/") for r in hub.requests) == 4  # 2 ranges x 2 shards,
    # each after the Hub's redirect, with the Range header kept
    assert data["hub"]["bytes_fetched"] == sum(hub.served.values()) - hub.served.get("error", 0)
    assert f"{data['hub']['bytes_fetched']:,} bytes fetched in all" in result.stderr
    assert "README.md" not in hub.served  # nothing the plan does not read


def test_offline_mode_plans_from_the_cache_without_a_request(hub, servecap):
    hub.add("acme/tiny", sharded_repo())
    online = plan_json(servecap("plan", "acme/tiny", "--device", "1GiB", "--json"))
    asked = len(hub.requests)
    offline = plan_json(servecap("plan", "acme/tiny", "--device", "1GiB", "--json",
                                 HF_HUB_OFFLINE="1"))
    assert len(hub.requests) == asked
    assert offline["weights_bytes"] == online["weights_bytes"]
    assert offline["hub"]["bytes_fetched"] == 0 and offline["hub"]["bytes_from_cache"] > 0
    again = plan_json(servecap("plan", "acme/tiny", "--device", "1GiB", "--json"))
    assert again["hub"]["files"][0]["file"] == "revision listing"  # online: only the listing
    assert again["hub"]["bytes_fetched"] == again["hub"]["files"][0]["bytes"]


def test_a_revision_sha_reads_that_commit(hub, servecap):
    old = hub.add("acme/single", {"config.json": json.dumps(CONFIG).encode(),
                                  "model.safetensors": save(SHARD_2)})
    new = hub.add("acme/single", {"config.json": json.dumps(CONFIG).encode(),
                                  "model.safetensors": save({**SHARD_1, **SHARD_2})})
    at_old = plan_json(servecap("plan", f"acme/single@{old}", "--device", "1GiB", "--json"))
    at_main = plan_json(servecap("plan", "acme/single", "--device", "1GiB", "--json"))
    assert (at_old["model_revision_sha"], at_main["model_revision_sha"]) == (old, new)
    assert at_old["weights_bytes"] == nbytes(SHARD_2)
    assert at_main["weights_bytes"] == nbytes(SHARD_1) + nbytes(SHARD_2)


def test_bin_only_repo_is_planned_from_config_and_says_derived(hub, servecap):
    hub.add("acme/legacy", {"config.json": json.dumps(CONFIG).encode(),
                            "pytorch_model.bin": b"\0" * 4096,
                            "quantize_config.json": b'{"bits": 4, "group_size": 128}'})
    data = plan_json(servecap("plan", "acme/legacy", "--device", "1GiB", "--json"))
    assert any("derived from config.json, not read" in n and "pytorch_model.bin" in n
               for n in data["notes"])
    assert any(n.startswith("quantize_config.json is in the repo") for n in data["notes"])
    assert "quantize_config.json" in hub.served
    assert "safetensors" not in data["lines"][0]["from"]
    assert hub.served.get("pytorch_model.bin", 0) == 0


def test_a_local_directory_shadows_the_id(hub, servecap, tmp_path):
    hub.add("acme/tiny", sharded_repo())
    (tmp_path / "acme" / "tiny").mkdir(parents=True)
    (tmp_path / "acme" / "tiny" / "config.json").write_text(json.dumps(CONFIG))
    data = plan_json(servecap("plan", "acme/tiny", "--device", "1GiB", "--json"))
    assert data["hub"] is None and hub.requests == []


def test_models_hub_says_what_was_read_and_from_where(hub, servecap):
    sha = hub.add("acme/tiny", sharded_repo())
    result = servecap("models", "--hub", "acme/tiny")
    assert result.returncode == 0, result.stderr
    assert f"acme/tiny @ main = {sha} from {hub.url}" in result.stdout
    assert "model-00002-of-00002.safetensors: " in result.stdout
    assert "llama, 2 layers" in result.stdout
    data = json.loads(servecap("models", "--hub", "acme/tiny", "--json").stdout)
    assert data["layers"] == 2 and data["hub"]["sha"] == sha
    assert {f["from"] for f in data["hub"]["files"] if f["file"] != "revision listing"} == {
        "cache"}  # the second read fetches only the listing


def test_simulate_takes_the_same_ids(hub, servecap, tmp_path):
    hub.add("acme/tiny", sharded_repo())
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n")
    result = servecap("simulate", "acme/tiny", "--device", "h100-80gb", "--trace", "t.csv",
                      "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["policies"][0]["completed"] == 1
    assert hub.served_bytes(".safetensors") > 0


def test_workbook_inputs_name_the_commit(hub, servecap, tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    sha = hub.add("acme/tiny", sharded_repo())
    result = servecap("plan", "acme/tiny", "--device", "1GiB", "--xlsx", "plan.xlsx")
    assert result.returncode == 0, result.stderr
    rows = openpyxl.load_workbook(tmp_path / "plan.xlsx")["Inputs"].iter_rows(values_only=True)
    model = next(row for row in rows if row[0] == "model")
    assert model[1] == "acme/tiny" and f"acme/tiny at commit {sha}" in model[3]


def test_verify_takes_the_same_ids_and_runs_the_architecture(hub, servecap):
    pytest.importorskip("torch")
    config = {**CONFIG, "vocab_size": 256, "torch_dtype": "float32"}
    sha = hub.add("acme/tiny", {"config.json": json.dumps(config).encode()})
    result = servecap("verify", "acme/tiny", "--device", "cpu", "--device-memory", "16MiB",
                      "--context", "256", "--concurrency", "4", "--runtime-peak", "12MiB",
                      "--json", OMP_NUM_THREADS="1")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)["record"]
    assert record["model_config"].endswith(f"{sha}/config.json")
    assert record["weights"].startswith("seeded random")  # real ones: hf download, --weights


def test_a_modelopt_repo_is_read_with_its_hf_quant_config(hub, servecap):
    """modelopt <= 0.29 wrote its quantization to hf_quant_config.json beside a config.json
    that states none: read as vLLM reads it (FP8 linears, lm_head excluded)."""
    quant = {"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    hub.add("acme/fp8", {"config.json": json.dumps(CONFIG).encode(),
                         "hf_quant_config.json": json.dumps(quant).encode(),
                         "pytorch_model.bin": b"\0" * 4096})
    data = plan_json(servecap("plan", "acme/fp8", "--device", "1GiB", "--json"))
    linear = 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64)  # q, o; k, v; gate, up, down
    assert data["lines"][0]["from"].startswith(f"fp8: {linear:,} params x 8 bits")
    assert any("hf_quant_config.json (config.json states none)" in n for n in data["notes"])
    assert not any(n.startswith("hf_quant_config.json is in the repo") for n in data["notes"])
