"""`servecap plan` with parallel sizes and engine budgets, driven through the real CLI."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

runner = CliRunner()


def plan_json(*args):
    result = runner.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_single_gpu_keeps_the_contract_keys_and_adds_ranks():
    out = plan_json("llama-3.1-8b", "--device", "80GiB", "--context", "8192")
    for key in ("weights_bytes", "weight_metadata_bytes", "runtime_peak_bytes", "safety_bytes",
                "kv_bytes_per_token", "kv_bytes_per_request", "kv_bytes_total", "device_bytes",
                "committed_bytes", "free_bytes", "memory_ceiling_requests"):
        assert isinstance(out[key], int)
    assert len(out["ranks"]) == 1 and out["ranks"][0]["binding"]
    assert out["kv_pool_bytes"] is None  # the plain ledger has no engine pool: null
    assert out["num_gpu_blocks"] is None and out["ranks"][0]["max_concurrency"] is None


def test_tp_pp_dp_ranks_and_binding():
    out = plan_json("llama-3.1-70b-instruct", "--device", "h100-80gb", "--context", "8192",
                    "-tp", "2", "--pipeline-parallel-size", "2", "--data-parallel-size", "3")
    assert [r["rank"] for r in out["ranks"]] == [0, 1, 2, 3]
    assert [r["stage"] for r in out["ranks"]] == [0, 0, 1, 1]
    assert out["ranks"][0]["holds_embedding"] and out["ranks"][3]["holds_lm_head"]
    assert out["num_devices"] == 12
    assert out["binding_rank"] == 2 and "binds" in out["binding_reason"]
    assert out["kv_bytes_per_token"] == 40 * 2 * 4 * 128 * 2


def test_vllm_engine_fields_top_level_and_per_rank():
    out = plan_json("llama-3.1-8b", "--device", "h100-80gb", "--context", "8192",
                    "--engine", "vllm", "-tp", "2", "--gpu-memory-utilization", "0.85")
    for key in ("kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens"):
        assert isinstance(out[key], int) and out[key] > 0
        assert all(isinstance(r[key], int) for r in out["ranks"])
    assert isinstance(out["max_concurrency"], float)
    assert out["kv_cache_tokens"] == out["num_gpu_blocks"] * 16
    assert out["max_concurrency"] == out["num_gpu_blocks"] / 512


def test_measured_lines_are_marked():
    out = plan_json("llama-3.1-8b", "--device", "h100-80gb", "--context", "8192",
                    "--engine", "vllm", "--weights", "14.99GiB", "--non-torch", "0.35GiB",
                    "--kv-cache-memory", "20GiB")
    measured = {line["key"] for line in out["lines"] if line["measured"]}
    assert {"weights", "non_torch", "kv_pool_spare"} <= measured
    assert out["kv_pool_bytes"] == 20 * 2**30
    text = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "h100-80gb", "--context",
                               "8192", "--engine", "vllm", "--weights", "14.99GiB"]).output
    assert "[measured]" in text and "GPU KV cache size:" in text
    assert "Maximum concurrency for 8,192 tokens per request:" in text


def test_text_output_names_the_binding_rank():
    result = runner.invoke(app, ["plan", "deepseek-v3", "--device", "h200-141gb", "--context",
                                 "8192", "-tp", "8", "-pp", "2", "--engine", "vllm"])
    assert "binds:" in result.output and "stage 0: layers 0-30" in result.output


def test_tp_that_does_not_divide_the_heads_is_a_clear_error():
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "80GiB", "-tp", "3"])
    assert result.exit_code == 2
    assert "--tensor-parallel-size = 3" in result.stderr and "32 query heads" in result.stderr
    assert "Traceback" not in result.output


def test_engine_knob_for_another_engine_is_an_error():
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "80GiB", "--engine",
                                 "trtllm", "--gpu-memory-utilization", "0.8"])
    assert result.exit_code == 2 and "applies to --engine vllm" in result.stderr


@pytest.mark.parametrize("args", [("--gpu-memory-utilization", "0.8"), ("--engine", "VLLM"),
                                  ("--engine", "vllm", "--gpu-memory-utilization", "0.8")])
def test_one_engines_knob_names_the_engine_and_case_does_not_matter(args):
    assert plan_json("llama-3.1-8b", "--device", "80GiB", "--context", "4096",
                     *args)["engine"] == "vllm"


def test_knobs_of_two_engines_without_engine_are_an_error():
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "80GiB",
                                 "--gpu-memory-utilization", "0.8", "--mem-fraction-static",
                                 "0.8"])
    assert result.exit_code == 2 and "applies to --engine" in result.stderr


def test_engine_block_size_defaults():
    out = plan_json("llama-3.1-8b", "--device", "80GiB", "--context", "4096",
                    "--engine", "trtllm")
    assert out["block_size_tokens"] == 32
    out = plan_json("llama-3.1-8b", "--device", "80GiB", "--context", "4096",
                    "--engine", "sglang")
    assert out["kv_cache_tokens"] == out["num_gpu_blocks"]


def test_checkpoint_total_is_shared_out_by_rank(tmp_path):
    """A model directory's index total_size is the whole checkpoint; each rank takes its
    share of it (here tp 2: half the sharded tensors plus every replicated norm)."""
    from servecap.model_configs import load_model
    cfg = load_model("llama-3.1-8b").spec
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "tie_word_embeddings": False, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16"}))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}))
    one = plan_json(str(tmp_path), "--device", "80GiB", "--context", "4096")
    two = plan_json(str(tmp_path), "--device", "80GiB", "--context", "4096", "-tp", "2")
    assert one["weights_bytes"] == 16_060_522_496
    assert two["weights_bytes"] == 8_030_527_488  # exactly the inventory's rank share
    assert cfg.num_layers == 32


def test_vllm_style_sizes_for_kv_cache_memory():
    out = plan_json("llama-3.1-8b", "--device", "80GiB", "--context", "4096",
                    "--engine", "vllm", "--kv-cache-memory", "20G")
    assert out["kv_pool_bytes"] == 20 * 2**30


@pytest.mark.parametrize(("dp", "words"), [("1", "1 replica serves 3 "),
                                            ("2", "2 replicas serve 6 ")])
def test_the_replica_line_agrees_in_number(dp, words):
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "h100-80gb", "--engine",
                                 "vllm", "-dp", dp], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and words in result.stdout, result.stdout[-400:]


def test_sglangs_one_token_pages_read_singular_in_the_engines_words():
    """SGLang pages one token at a time: the plan printed '# GPU blocks: N of 1 tokens'."""
    out = CliRunner().invoke(app, ["plan", "qwen3-14b", "--device", "h100-80gb", "-tp", "2",
                                   "--engine", "sglang"], terminal_width=80)
    assert out.exit_code == 0, out.output
    blocks = [line for line in out.stdout.splitlines() if "# GPU blocks:" in line]
    assert blocks and all(line.rstrip().endswith("B each)") and " of 1 token (" in line
                          for line in blocks), blocks
