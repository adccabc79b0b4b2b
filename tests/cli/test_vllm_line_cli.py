"""A pasted `vllm serve` line: plan reads it with vLLM's flag names and prints what the same
servecap flags print; ignored flags are listed, memory-changing unmodelled ones refused, and
search's own launch line pasted back gives its answer's pool."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.errors import SpecError
from servecap.scenario.spec import DEFAULT
from servecap.scenario.vllm_line import parse_vllm_line

runner = CliRunner()
DIR = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "Qwen--Qwen3-32B")
LINE = ["vllm", "serve", DIR, "--tensor-parallel-size", "2", "--max-model-len", "8192",
        "--gpu-memory-utilization", "0.85", "--kv-cache-dtype", "fp8", "--block-size", "32",
        "--max-num-seqs", "64"]
FLAGS = [DIR, "--engine", "vllm", "-tp", "2", "--context", "8192",
         "--gpu-memory-utilization", "0.85", "--kv-dtype", "fp8", "--block-size", "32",
         "--max-num-seqs", "64"]


def plan(*args):
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code in (0, 1), result.output
    return result


def test_the_pasted_line_prints_the_same_json_as_the_servecap_flags():
    pasted = plan("--device", "h100-80gb", "--json", "--", *LINE)
    flagged = plan(*FLAGS, "--device", "h100-80gb", "--json")
    assert pasted.stdout == flagged.stdout
    out = json.loads(pasted.stdout)
    assert out["kv_pool_bytes"] > 0 and out["block_size_tokens"] == 32
    assert len(out["ranks"]) == 2


def test_underscores_equals_signs_and_short_names_read_as_vllm_reads_them():
    spelled = ["vllm", "serve", DIR, "-tp=2", "--max_model_len=8k", "--gpu-memory-utilization",
               "0.85", "--kv_cache_dtype", "fp8_e4m3", "--block-size=32", "--max-num-seqs",
               "64"]
    parsed = parse_vllm_line(spelled).scenario
    assert parsed.scheduler.max_model_len == 8000  # vLLM's human_readable_int: 8k = 8,000
    assert parse_vllm_line([*LINE[:5], "--max-model-len", "8K"]).scenario \
        .scheduler.max_model_len == 8192
    assert parsed.dtypes.kv_cache_dtype == "fp8" and parsed.parallel.tensor_parallel_size == 2
    assert parsed.engine.name == "vllm"


def test_flags_that_do_not_change_memory_are_listed_never_dropped():
    result = plan("--device", "h100-80gb", "--json", "--", *LINE, "--port", "8001",
                  "--trust-remote-code", "--served-model-name", "q", "--disable-log-stats")
    assert "ignored (4" in result.stderr
    for flag in ("--port", "--trust-remote-code", "--served-model-name", "--disable-log-stats"):
        assert flag in result.stderr
    assert json.loads(result.stdout) == json.loads(plan(*FLAGS, "--device", "h100-80gb",
                                                        "--json").stdout)


@pytest.mark.parametrize(("extra", "needle"), [
    (["--cpu-offload-gb", "8"], "--cpu-offload-gb"),
    (["--enforce-eager"], "--enforce-eager"),
    (["--specialize-active-lora"], "--specialize-active-lora"),
    (["--kv-transfer-config", "{}"], "--kv-transfer-config"),
    (["--bogus-flag", "1"], "--bogus-flag"),
    (["--speculative-config", '{"model": "x", "num_speculative_tokens": 3}'],
     "--speculative-config"),
    (["--quantization", "bitsandbytes"], "--quantization"),
    (["--kv-cache-dtype", "int3"], "--kv-cache-dtype"),
])
def test_an_unmodelled_memory_flag_is_refused_by_name(extra, needle):
    result = runner.invoke(app, ["plan", "--device", "h100-80gb", "--", *LINE, *extra])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and f"vllm serve {needle}" in line


def test_a_flag_before_the_line_replaces_the_lines_value():
    result = plan("--device", "h100-80gb", "--context", "4096", "--json", "-v", "--", *LINE)
    assert json.loads(result.stdout)["context_tokens"] == 4096
    assert "--context 4096 (command line) over the vLLM line's 8192" in result.stderr


def test_booleans_take_both_spellings():
    on = parse_vllm_line([*LINE, "--enable-expert-parallel"]).scenario
    off = parse_vllm_line([*LINE, "--no-enable-prefix-caching"]).scenario
    assert on.parallel.enable_expert_parallel and not off.scheduler.enable_prefix_caching
    assert DEFAULT.scheduler.enable_prefix_caching


def test_not_a_vllm_line_is_one_error():
    with pytest.raises(SpecError, match="vllm serve MODEL"):
        parse_vllm_line(["sglang", "serve", "x"])


def test_searchs_launch_line_pasted_back_gives_its_answers_pool(searched):
    report = searched
    best, (line,) = report["cheapest"], report["launch"]["vllm"]
    words = line.split()
    assert words[:2] == ["vllm", "serve"]
    words[2] = "llama-3.1-8b"  # the Hub id the line serves is the bundled file's hf_id
    planned = json.loads(plan("--device", best["device"], "--json", "--", *words).stdout)
    assert planned["num_gpu_blocks"] == best["num_kv_blocks_per_rank"]
    assert len(planned["ranks"]) == best["tensor_parallel_size"] * \
        best["pipeline_parallel_size"]


def test_the_api_server_module_line_reads_the_same_and_model_with_a_line_is_refused():
    module = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", DIR, *LINE[3:]]
    assert plan("--device", "h100-80gb", "--json", "--", *module).stdout == \
        plan("--device", "h100-80gb", "--json", "--", *LINE).stdout
    both = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "h100-80gb", "--", *LINE])
    assert both.exit_code == 2 and "not both" in both.stderr


def _plan_json(*args) -> dict:
    return json.loads(plan("--device", "h100-80gb", "--json", *args).stdout)


def test_dtype_is_the_model_dtype_weights_and_a_kv_cache_left_at_auto_follow_it():
    """vLLM's --dtype is the dtype of the weights and activations, and --kv-cache-dtype auto
    is the model dtype (vllm/config/model.py@18ec662 ModelConfig.dtype and .quantization;
    vllm/config/cache.py@c1d8642 CacheConfig.cache_dtype). Llama 3.1 8B: 8,030,261,248
    parameters (16,060,522,496 B in bf16, its model.safetensors.index.json total_size), so
    32,121,044,992 B in fp32; KV per token 32 layers x 8 KV heads x 128 x (K, V) x 4 B =
    262,144 B (config.json)."""
    line = ("--", "vllm", "serve", "llama-3.1-8b", "--max-model-len", "4096")
    fp32 = _plan_json(*line, "--dtype", "float32")
    assert fp32["weights_bytes"] == 32_121_044_992 == 2 * _plan_json(*line)["weights_bytes"]
    assert fp32["kv_bytes_per_token"] == 262_144
    assert {k: v["dtype"] for k, v in fp32["dtypes"].items()} == \
        {"weights": "fp32", "activations": "fp32", "kv_cache": "fp32"}
    flagged = _plan_json("llama-3.1-8b", "--engine", "vllm", "--context", "4096",
                         "--weight-dtype", "fp32", "--kv-dtype", "fp32",
                         "--activation-dtype", "fp32")
    assert fp32["weights_bytes"] == flagged["weights_bytes"]
    assert fp32["memory_ceiling_requests"] == flagged["memory_ceiling_requests"]
    # a KV dtype of its own stands; auto is the model dtype's
    fp8 = _plan_json(*line, "--dtype", "float", "--kv-cache-dtype", "fp8")
    assert fp8["weights_bytes"] == 32_121_044_992 and fp8["kv_bytes_per_token"] == 65_536
    half = _plan_json(*line, "--dtype", "half", "--kv-cache-dtype", "auto")
    assert half["dtypes"]["kv_cache"]["dtype"] == half["dtypes"]["weights"]["dtype"] == "fp16"
    assert _plan_json(*line, "--dtype", "auto") == _plan_json(*line)


def test_a_quantized_checkpoint_keeps_its_weights_under_dtype():
    """DeepSeek-V3's fp8 checkpoint: --dtype float16 leaves the fp8 weights as they are
    (vLLM reads quantization_config before --dtype); the activations and the KV cache (auto)
    take float16."""
    line = ("--", "vllm", "serve", "deepseek-v3", "-tp", "8", "--max-model-len", "4096")
    own, half = _plan_json(*line), _plan_json(*line, "--dtype", "float16")
    assert half["weights_bytes"] == own["weights_bytes"]
    assert half["dtypes"]["weights"] == own["dtypes"]["weights"] == {"dtype": "fp8", "bits": 8}
    assert half["dtypes"]["activations"]["dtype"] == half["dtypes"]["kv_cache"]["dtype"] == \
        "fp16"


@pytest.mark.parametrize("command", ["plan", "fit"])
def test_kv_cache_dtype_auto_is_accepted_as_a_flag_and_follows_the_model(command):
    """vLLM's default, which search prints in its launch lines: the model dtype's KV (bf16
    for Llama 3.1 8B's checkpoint)."""
    base = ["llama-3.1-8b", "--device", "h100-80gb", "--context", "4096", "--json"]
    auto = runner.invoke(app, [command, *base, "--kv-cache-dtype", "auto"])
    assert auto.exit_code == 0, auto.output
    assert auto.stdout == runner.invoke(app, [command, *base, "--kv-dtype", "bf16"]).stdout


@pytest.mark.parametrize("args", [
    ("--", "vllm", "serve", "llama-3.1-8b", "--block-size", "24"),
    ("llama-3.1-8b", "--engine", "vllm", "--block-size", "24"),
    ("llama-3.1-8b", "--engine", "vllm==0.11", "--block-size", "24"),
])
def test_a_block_size_vllm_refuses_is_refused_in_a_line_and_as_a_flag(args):
    """vLLM 0.11 takes 1, 8, 16, 32, 64, 128 or 256 (vllm/config/cache.py@c1d8642
    BlockSize); the newest rules take a multiple of 16 (FlashAttention's kernel blocks)."""
    result = runner.invoke(app, ["plan", "--device", "h100-80gb", *args])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("servecap: error: --block-size = 24: vllm>=")
    assert ("one of 1, 8, 16, 32, 64, 128, 256" if "vllm==0.11" in args
            else "a multiple of 16") in line
    plain = runner.invoke(app, ["plan", "llama-3.1-8b", "--device", "h100-80gb",
                                "--block-size", "24"])
    assert plain.exit_code == 0, plain.output  # servecap's own paging takes any size


@pytest.mark.parametrize(("line", "needle"), [
    (("gpt-oss-20b", "--dtype", "float16"), "--dtype = 'fp16': bf16: vLLM's mxfp4 kernels"),
    (("llama-3.1-8b", "--quantization", "fp8", "--dtype", "float32"),
     "--dtype = 'fp32': bf16 or fp16: vLLM's fp8 kernels"),
])
def test_a_dtype_the_quantized_kernels_do_not_take_is_refused(line, needle):
    """vLLM refuses a model dtype outside the method's get_supported_act_dtypes()
    (vllm/config/vllm.py@09f030e): Mxfp4Config takes bfloat16 only, Fp8Config bfloat16 and
    half."""
    result = runner.invoke(app, ["plan", "--device", "h100-80gb", "--", "vllm", "serve", *line,
                                 "--max-model-len", "4096"])
    assert result.exit_code == 2, result.output
    (text,) = result.stderr.strip().splitlines()
    assert needle in text
