"""`servecap reconcile` on real vLLM logs quoted from public issues (tests/fixtures/vllm_logs)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
runner = CliRunner()


def reconcile(log, *args):
    result = runner.invoke(app, ["reconcile", str(LOGS / f"{log}.log"), *args, "--json"])
    assert result.exit_code == 0, result.output
    return {row["key"]: row for row in json.loads(result.stdout)["rows"]}


def test_v0_log_lines_and_the_arithmetic_matching_vllm():
    rows = reconcile("v0_llama31_8b_rtx3090", "--model", "llama-3.1-8b")
    # checkpoint + vLLM's rotary cache (131,072 positions x 128 x 2 B) = the logged 14.9888 GiB
    assert rows["weights"]["predicted"] == 16_060_522_496 + 131_072 * 128 * 2
    assert rows["weights"]["advice"] == "matches"
    assert "--runtime-peak" in rows["runtime_peak"]["advice"]
    # with the log's own weights, activation and non-torch lines the pool is vLLM's, to rounding
    replanned = rows["kv_pool_replanned"]
    assert abs(replanned["residual"]) <= 0.01 * 2**30
    assert replanned["advice"] == "servecap's arithmetic matches vLLM's"
    assert "the logged count among them" in rows["num_gpu_blocks"]["advice"]


def test_v1_log_blocks_tokens_and_concurrency():
    rows = reconcile("v1_qwen3_14b_a100_40gb", "--model", "qwen3-14b", "--device", "a100-40gb")
    assert rows["kv_cache_tokens"]["logged"] == 42_656
    assert rows["num_gpu_blocks"]["logged"] == 2_666
    assert "2,664-2,668 blocks of 2,621,440 B" in rows["num_gpu_blocks"]["advice"]
    assert rows["max_concurrency"]["logged"] == 1.30


def test_draft_model_layers_are_named():
    result = runner.invoke(app, ["reconcile", str(LOGS / "v1_llama31_8b_eagle_h100.log"),
                                 "--model", "llama-3.1-8b", "--device", "h100-80gb"])
    assert result.exit_code == 0
    assert "3.1% more bytes" in result.output and "draft model" in result.output


def test_log_naming_another_model_is_an_error():
    result = runner.invoke(app, ["reconcile", str(LOGS / "v1_qwen3_0p6b_a100.log"),
                                 "--model", "llama-3.1-8b", "--device", "a100-80gb"])
    assert result.exit_code == 2
    assert "different model" in result.stderr and "Qwen/Qwen3-0.6B" in result.stderr


def test_log_with_another_models_kv_blocks_is_an_error():
    result = runner.invoke(app, ["reconcile", str(LOGS / "v1_qwen3_14b_a100_40gb.log"),
                                 "--model", "llama-3.1-8b", "--device", "a100-40gb"])
    assert result.exit_code == 2
    assert "different model" in result.stderr and "2,097,152 B" in result.stderr


def test_log_with_no_recognisable_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO: Uvicorn running on http://0.0.0.0:8000\n")
    result = runner.invoke(app, ["reconcile", str(log), "--model", "llama-3.1-8b"])
    assert result.exit_code == 2 and "none of vLLM's startup lines" in result.stderr
    assert "Traceback" not in result.output


def test_v1_log_without_a_device_asks_for_one():
    result = runner.invoke(app, ["reconcile", str(LOGS / "v1_qwen3_14b_a100_40gb.log"),
                                 "--model", "qwen3-14b"])
    assert result.exit_code == 2 and "--device" in result.stderr


def test_development_table_log_with_its_own_model(tmp_path):
    """vllm PR 10511's Meta-Llama-3-8B (Llama-3.1-8B's shape with an 8,192-token context):
    weights match the plan exactly and the replanned pool is the logged 53.29 GiB."""
    model = tmp_path / "Meta-Llama-3-8B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "tie_word_embeddings": False, "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16"}))
    rows = reconcile("v0dev_meta_llama3_8b_pr10511", "--model", str(model))
    assert rows["weights"]["advice"] == "matches"
    assert rows["kv_pool_replanned"]["advice"] == "servecap's arithmetic matches vLLM's"


def test_tensor_parallel_log_reconciles_per_rank():
    """vLLM issue 11251's log (0.6.6, tp > 1, model not named): its per-rank figures are those
    of a Llama-3.1-8B-shaped model at tp 2 (7.51 GiB weights incl. the rotary cache, 1 MiB
    blocks); planned at tp 1 its blocks would be twice the logged size."""
    rows = reconcile("v0_unknown_model_16gb_issue11251", "--model", "llama-3.1-8b", "-tp", "2")
    assert rows["weights"]["advice"] == "matches"
    assert rows["kv_pool_replanned"]["advice"] == "servecap's arithmetic matches vLLM's"
    assert "blocks of 1,048,576 B, the logged count among them" in \
        rows["num_gpu_blocks"]["advice"]
    assert rows["max_concurrency"]["logged"] == 1.54
    result = runner.invoke(app, ["reconcile", str(LOGS / "v0_unknown_model_16gb_issue11251.log"),
                                 "--model", "llama-3.1-8b"])
    assert result.exit_code == 2 and "different model" in result.stderr


def test_weights_far_from_the_plan_mean_another_model():
    result = runner.invoke(app, ["reconcile", str(LOGS / "v0_llama31_8b_rtx3090.log"),
                                 "--model", "llama-3.1-70b-instruct"])
    assert result.exit_code == 2 and "different model" in result.stderr
    assert "14.9888 GiB of weights" in result.stderr


def test_cuda_graph_estimate_is_taken_out_of_the_replanned_pool(tmp_path):
    """vLLM >= 0.19 subtracts its 'Estimated CUDA graph memory' from the KV budget."""
    log = tmp_path / "v1.log"
    log.write_text(
        "INFO [gpu_model_runner.py] Model loading took 14.99 GiB and 3.1 seconds\n"
        "INFO [gpu_worker.py] Estimated CUDA graph memory: 0.64 GiB total\n"
        "INFO [gpu_worker.py] Available KV cache memory: 56.84 GiB\n")
    rows = reconcile_path(log, "--model", "llama-3.1-8b", "--device", "h100-80gb",
                          "--max-model-len", "8192")
    assert rows["cuda_graphs"]["logged"] == round(0.64 * 2**30)
    assert "--cuda-graph-memory 0.64GiB" in rows["cuda_graphs"]["advice"]


def reconcile_path(path, *args):
    result = runner.invoke(app, ["reconcile", str(path), *args, "--json"])
    assert result.exit_code == 0, result.output
    return {row["key"]: row for row in json.loads(result.stdout)["rows"]}


def test_reconcile_refuses_another_engines_semantics(run) -> None:
    """A vLLM log planned with SGLang's budget would be compared against the wrong formula."""
    result = run("reconcile", LOGS / "v0_llama31_8b_rtx3090.log", "--model", "llama-3.1-8b",
                 "--engine", "sglang", "--mem-fraction-static", "0.8")
    assert result.exit_code == 2
    assert "--engine = 'sglang'" in result.stderr and "vllm" in result.stderr
