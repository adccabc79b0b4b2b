"""Pasted SGLang and TensorRT-LLM launch lines: plan reads each with the engine's own flag names
and prints what the same servecap flags print; search's own lines pasted back give its answer's
plan; ignored flags are listed, and unmodelled memory flags, bad values and unknown programs are
one line with exit 2."""

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.scenario.launch_line import parse_launch_line
from servecap.sim.search.launch import launch_lines

runner = CliRunner()
DIR = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "Qwen--Qwen3-32B")
SAME = [DIR, "--device", "h100-80gb", "-tp", "2", "--context", "8192", "--kv-dtype", "fp8",
        "--block-size", "32", "--max-num-seqs", "64", "--json"]
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", DIR, "--tp-size", "2",
          "--context-length", "8192", "--mem-fraction-static", "0.85", "--kv-cache-dtype",
          "fp8_e4m3", "--page-size", "32", "--max-running-requests", "64"]
TRTLLM = ["trtllm-serve", DIR, "--tp_size", "2", "--max_seq_len", "8192",
          "--kv_cache_free_gpu_memory_fraction", "0.85", "--max_batch_size", "64",
          "--extra_llm_api_options", "kv.yaml"]
KV_YAML = {"kv_cache_config": {"dtype": "fp8", "tokens_per_block": 32}}


def plan(*args):
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code in (0, 1), result.output
    return result


def pasted(*line, device="h100-80gb"):
    return plan("--device", device, "--json", "--", *line)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """A working directory holding the YAML the TensorRT-LLM lines name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kv.yaml").write_text(yaml.safe_dump(KV_YAML))
    (tmp_path / "kv_fp8.yaml").write_text(yaml.safe_dump({"kv_cache_config": {"dtype": "fp8"}}))
    return tmp_path


def test_an_sglang_line_prints_the_same_json_as_the_servecap_flags():
    flagged = plan(*SAME, "--engine", "sglang", "--mem-fraction-static", "0.85")
    assert pasted(*SGLANG).stdout == flagged.stdout
    serve = ["sglang", "serve", DIR, *SGLANG[5:]]
    assert pasted(*serve).stdout == flagged.stdout
    out = json.loads(flagged.stdout)
    assert out["engine"] == "sglang" and out["block_size_tokens"] == 32
    assert len(out["ranks"]) == 2 and out["kv_pool_bytes"] > 0
    vllm = json.loads(plan(*SAME, "--engine", "vllm", "--gpu-memory-utilization", "0.85").stdout)
    assert vllm["kv_pool_bytes"] != out["kv_pool_bytes"]  # SGLang's budget, not vLLM's


def test_a_trtllm_line_and_its_yaml_print_the_same_json_as_the_servecap_flags(in_tmp):
    flagged = plan(*SAME, "--engine", "trtllm", "--free-gpu-memory-fraction", "0.85")
    assert pasted(*TRTLLM).stdout == flagged.stdout
    assert pasted("trtllm-serve", "serve", *TRTLLM[1:]).stdout == flagged.stdout
    out = json.loads(flagged.stdout)
    assert out["engine"] == "trtllm" and out["block_size_tokens"] == 32
    assert out["dtypes"]["kv_cache"] == {"dtype": "fp8", "bits": 8}  # from the YAML


def test_the_yaml_overrides_the_options_wherever_it_stands(in_tmp):
    (in_tmp / "half.yaml").write_text(yaml.safe_dump(
        {"kv_cache_config": {"free_gpu_memory_fraction": 0.5, "enable_block_reuse": False}}))
    first = parse_launch_line(["trtllm-serve", DIR, "--config", "half.yaml",
                               "--kv_cache_free_gpu_memory_fraction", "0.9"]).scenario
    last = parse_launch_line(["trtllm-serve", DIR, "--kv_cache_free_gpu_memory_fraction",
                              "0.9", "--extra_llm_api_options", "half.yaml"]).scenario
    assert first == last and first.memory.free_gpu_memory_fraction == 0.5
    assert not first.scheduler.enable_prefix_caching


def test_sglangs_max_total_tokens_caps_the_pool_as_the_servecap_flag_does():
    """--max-total-tokens (SGLang's cap, model_runner.py init_memory_pool): the smaller of it
    and the profiled pool, in whole pages; a pasted line and servecap's flag print the same."""
    flagged = plan(*SAME, "--engine", "sglang", "--mem-fraction-static", "0.85",
                   "--max-total-tokens", "20030")
    assert pasted(*SGLANG, "--max-total-tokens", "20030").stdout == flagged.stdout
    out = json.loads(flagged.stdout)
    assert out["kv_cache_tokens"] == 20_000  # 625 whole pages of 32
    wide = json.loads(plan(*SAME, "--engine", "sglang", "--max-total-tokens", "10000000").stdout)
    assert wide["kv_cache_tokens"] == json.loads(plan(*SAME, "--engine", "sglang").stdout)[
        "kv_cache_tokens"]
    refused = runner.invoke(app, ["plan", *SAME, "--engine", "vllm", "--max-total-tokens", "9"])
    assert refused.exit_code == 2 and "--max-total-tokens" in refused.output


def test_sglangs_nnodes_spreads_the_tp_group_as_vllms_does():
    """SGLang's --nnodes: a tensor-parallel group across nodes gets no custom all-reduce, so
    its collectives are planned as across nodes, as servecap's --nnodes plans them."""
    flagged = plan(*SAME, "--engine", "sglang", "--mem-fraction-static", "0.85", "--nnodes", "2")
    assert pasted(*SGLANG, "--nnodes", "2").stdout == flagged.stdout
    one, two = (json.loads(plan(*SAME, "--engine", "sglang", *extra).stdout)["kv_pool_bytes"]
                for extra in ((), ("--nnodes", "2")))
    assert two > one  # 128 MiB of NCCL buffers across nodes against NVLink's 1.75 GiB


@pytest.mark.parametrize(("engine", "knob"), [("sglang", "--mem-fraction-static"),
                                              ("trtllm", "--free-gpu-memory-fraction")])
def test_searchs_line_pasted_back_plans_its_answer_as_servecap_flags_do(searched, engine, knob):
    best, (line,) = searched["cheapest"], searched["launch"][engine]
    words = line.split()
    model_at = words.index("--model-path") + 1 if engine == "sglang" else 1
    words[model_at] = "llama-3.1-8b"  # the Hub id the line serves is the bundled file's hf_id
    kv = ["--kv-dtype", "fp8"] if best["kv_dtype"] == "fp8" else []  # auto: the checkpoint's
    answer = ["llama-3.1-8b", "--device", best["device"], "--engine", engine,
              "-tp", str(best["tensor_parallel_size"]), "-pp", str(best["pipeline_parallel_size"]),
              "--max-num-seqs", str(best["max_num_seqs"]),
              "--max-num-batched-tokens", str(best["max_num_batched_tokens"]),
              "--context", str(searched["max_model_len"]), *kv,
              knob, words[words.index(_FRACTION[engine]) + 1], "--json"]
    back = pasted(*words, device=best["device"])
    assert back.stdout == plan(*answer).stdout
    out = json.loads(back.stdout)
    assert out["engine"] == engine and out["context_tokens"] == searched["max_model_len"]
    assert len(out["ranks"]) == best["tensor_parallel_size"] * best["pipeline_parallel_size"]


_FRACTION = {"sglang": "--mem-fraction-static", "trtllm": "--kv_cache_free_gpu_memory_fraction"}


def test_an_expert_parallel_fp8_line_from_search_reads_back_as_its_scenario(tmp_path):
    row = {"mode": "aggregated", "replicas": 2, "tensor_parallel_size": 2,
           "pipeline_parallel_size": 1, "expert_parallel": True, "max_num_seqs": 32,
           "max_num_batched_tokens": 4096, "kv_dtype": "fp8", "weight_dtype": "fp8"}
    (line,) = launch_lines("qwen3-30b-a3b", row, 4096, 0.9)["sglang"]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({
        "model": {"name": "qwen3-30b-a3b"}, "device": {"name": "h100-80gb"},
        "engine": {"name": "sglang"},
        "parallel": {"tensor_parallel_size": 2, "data_parallel_size": 2,
                     "enable_expert_parallel": True},
        "dtypes": {"weight_dtype": "fp8", "kv_cache_dtype": "fp8"},
        "scheduler": {"max_model_len": 4096, "max_num_seqs": 32,
                      "max_num_batched_tokens": 4096, "enable_chunked_prefill": True},
        "memory": {"mem_fraction_static": 0.9}}))
    back = pasted(*line.split())
    assert back.stdout == plan("--scenario", str(scenario), "--json").stdout
    assert json.loads(back.stdout)["data_parallel_size"] == 2


def test_flags_that_do_not_change_memory_are_listed_never_dropped(in_tmp):
    (in_tmp / "kv.yaml").write_text(yaml.safe_dump({**KV_YAML, "print_iter_log": True}))
    sglang = pasted(*SGLANG, "--port", "30001", "--trust-remote-code", "--log-level", "info")
    assert "sglang: ignored (3" in sglang.stderr
    assert all(flag in sglang.stderr for flag in ("--port", "--trust-remote-code", "--log-level"))
    trtllm = pasted(*TRTLLM, "--host", "0.0.0.0", "--trust_remote_code")
    assert "trtllm-serve: ignored (3" in trtllm.stderr
    assert "kv.yaml: print_iter_log" in trtllm.stderr and "--host" in trtllm.stderr


def test_a_flag_before_the_line_replaces_its_value_and_v_says_so():
    result = plan("--device", "h100-80gb", "--context", "4096", "--json", "-v", "--", *SGLANG)
    assert json.loads(result.stdout)["context_tokens"] == 4096
    assert "--context 4096 (command line) over the SGLang line's 8192" in result.stderr


@pytest.mark.parametrize(("line", "needle"), [
    (["foo", "serve", DIR], "launch line = 'foo serve"),
    ([*SGLANG, "--tp-size", "0"], "sglang --tp-size = '0': a whole number >= 1"),
    ([*SGLANG[:-2], "--max-running-requests", "many"], "sglang --max-running-requests = 'many'"),
    ([*SGLANG, "--kv-cache-dtype", "nvfp4"], "sglang --kv-cache-dtype = 'nvfp4': allowed: auto"),
    ([*SGLANG, "--mem-fraction-static", "1.5"], "sglang --mem-fraction-static = '1.5'"),
    ([*SGLANG, "--context-length", "8K"], "8Ki (8,192)"),
    ([*SGLANG, "--quantization", "bitsandbytes"], "sglang --quantization = 'bitsandbytes'"),
    ([*SGLANG, "--speculative-algorithm", "EAGLE"], "sglang --speculative-algorithm = 'EAGLE'"),
    ([*SGLANG, "--enable-dp-attention"], "sglang --enable-dp-attention"),
    ([*SGLANG, "--max-total-tokens", "0"], "sglang --max-total-tokens = '0'"),
    ([*SGLANG, "--cpu-offload-gb", "8"], "sglang --cpu-offload-gb = '8': only 0"),
    ([*SGLANG, "--ep-size", "3"], "sglang --ep-size = 3: 1 or the --tp-size (2)"),
    ([*SGLANG, "--tp_size", "2"], "(sglang spells it --tp-size)"),
    ([*SGLANG, "--bogus-flag", "1"], "sglang --bogus-flag = '1': not a sglang flag"),
    ([*TRTLLM, "--backend", "tensorrt"], "trtllm-serve --backend = 'tensorrt': pytorch"),
    ([*TRTLLM, "--tp-size", "2"], "(trtllm-serve spells it --tp_size)"),
    ([*TRTLLM, "--max_beam_width", "4"], "trtllm-serve --max_beam_width = '4': only 1"),
    ([*TRTLLM[:-1], "missing.yaml"], "trtllm-serve --extra_llm_api_options = 'missing.yaml'"),
    (["trtllm-serve", "grpc", DIR], "trtllm-serve = 'grpc'"),
])
def test_bad_input_is_one_line_naming_the_flag_and_value(in_tmp, line, needle):
    result = runner.invoke(app, ["plan", "--device", "h100-80gb", "--", *line])
    assert result.exit_code == 2, result.output
    text = result.stderr.strip()
    assert "\n" not in text and text.startswith("servecap: error:") and needle in text
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("config", "needle"), [
    ({"cuda_graph_config": {"max_batch_size": 64}}, "kv.yaml: cuda_graph_config = "),
    ({"kv_cache_config": {"dtype": "nvfp4"}}, "kv.yaml: kv_cache_config.dtype = 'nvfp4'"),
    ({"kv_cache_config": {"max_gpu_total_bytes": 4096}},
     "kv.yaml: kv_cache_config.max_gpu_total_bytes = 4096"),
    ({"max_batch_size": True}, "kv.yaml: max_batch_size = True: a whole number >= 1"),
    ({"surprise": 1}, "kv.yaml: surprise = 1: not an LLM API option"),
    (["not", "a", "mapping"], "a YAML mapping"),
])
def test_a_bad_yaml_key_names_the_file_the_key_and_the_value(in_tmp, config, needle):
    (in_tmp / "kv.yaml").write_text(yaml.safe_dump(config))
    result = runner.invoke(app, ["plan", "--device", "h100-80gb", "--", *TRTLLM])
    assert result.exit_code == 2, result.output
    assert "\n" not in result.stderr.strip() and needle in result.stderr


def test_trtllm_max_tokens_in_the_yaml_caps_the_pool(in_tmp):
    """KvCacheConfig.max_tokens: the smaller of it and the fraction's pool, in whole blocks."""
    (in_tmp / "kv.yaml").write_text(yaml.safe_dump({"kv_cache_config": {"max_tokens": 1000}}))
    result = runner.invoke(app, ["plan", "--device", "h100-80gb", "--json", "--", *TRTLLM])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["kv_cache_tokens"] == 1024  # ceil(1000 / 32) x 32


def test_sglang_reads_its_own_numbers_and_switches():
    line = parse_launch_line(["sglang", "serve", DIR, "--tp", "4", "--ep", "4",
                              "--context-length", "8k", "--chunked-prefill-size", "-1",
                              "--max-prefill-tokens", "32Ki", "--disable-radix-cache"])
    s = line.scenario
    assert s.engine.name == "sglang" and s.parallel.tensor_parallel_size == 4
    assert s.parallel.enable_expert_parallel and s.scheduler.max_model_len == 8000
    assert s.scheduler.enable_chunked_prefill is False
    assert s.scheduler.max_num_batched_tokens == 32 * 1024  # unchunked: the prefill batch
    assert not s.scheduler.enable_prefix_caching and "--max-prefill-tokens" in line.modelled


def test_without_flags_the_engines_defaults_stay_unset_for_the_ledger_to_fill():
    s = parse_launch_line(["trtllm-serve", DIR]).scenario
    assert s.engine.name == "trtllm" and s.memory.free_gpu_memory_fraction is None
    assert s.scheduler.block_size is None and s.scheduler.max_model_len is None
    out = json.loads(pasted("trtllm-serve", DIR).stdout)
    assert out["block_size_tokens"] == 32  # TensorRT-LLM's tokens_per_block default


_ROWS = st.fixed_dictionaries({
    "mode": st.just("aggregated"), "replicas": st.integers(1, 4),
    "tensor_parallel_size": st.sampled_from([1, 2, 4, 8]),
    "pipeline_parallel_size": st.integers(1, 4), "expert_parallel": st.booleans(),
    "max_num_seqs": st.integers(1, 2048), "max_num_batched_tokens": st.integers(1, 65536),
    "kv_dtype": st.sampled_from(["bf16", "fp8"]), "weight_dtype": st.sampled_from(["bf16", "fp8"]),
})


@settings(max_examples=60, deadline=None)
@given(row=_ROWS, context=st.integers(1, 1 << 20), util=st.integers(50, 99))
def test_every_line_search_prints_reads_back_as_its_answer(row, context, util):
    """For any answer, each engine's printed line reads back to the answer's own fields."""
    lines = launch_lines("llama-3.1-8b", row, context, util / 100)
    tp, ep = row["tensor_parallel_size"], row["expert_parallel"]
    for engine, (line,) in lines.items():
        words = line.split(": ", 1)[-1] if line.startswith("#") else line
        s = _read(engine, words)
        assert s.engine.name == engine and s.parallel.tensor_parallel_size == tp
        assert s.parallel.pipeline_parallel_size == row["pipeline_parallel_size"]
        assert s.scheduler.max_num_seqs == row["max_num_seqs"]
        assert s.scheduler.max_num_batched_tokens == row["max_num_batched_tokens"]
        assert s.scheduler.max_model_len == context
        assert s.dtypes.kv_cache_dtype == (None if row["kv_dtype"] == "bf16" else "fp8")
        assert s.parallel.enable_expert_parallel == (ep and (tp > 1 or engine == "vllm"))
        fraction = {"vllm": s.memory.gpu_memory_utilization, "sglang":
                    s.memory.mem_fraction_static, "trtllm": s.memory.free_gpu_memory_fraction}
        assert fraction[engine] == util / 100
        if engine != "trtllm":  # trtllm-serve: one replica per line, the weights' own dtype
            assert s.parallel.data_parallel_size == row["replicas"]
            assert s.dtypes.weight_dtype == (None if row["weight_dtype"] == "bf16" else "fp8")


def _read(engine: str, line: str):
    """The line as a shell reads it; trtllm-serve's fp8 YAML is the one its comment names."""
    if engine == "trtllm" and "kv_fp8.yaml" in line:
        line = line.replace("kv_fp8.yaml", str(_KV_FP8))
    return parse_launch_line(line).scenario


_KV_FP8 = Path(__file__).resolve().parents[1] / "fixtures" / "launch" / "kv_fp8.yaml"


def test_sglang_and_trtllm_dtype_is_the_model_dtype(in_tmp):
    """SGLang's --dtype ('Data type for model weights and activations',
    python/sglang/srt/arg_groups/fields/model.py@6074b7d) and TensorRT-LLM's dtype ('The data
    type to use for the model', tensorrt_llm/llmapi/llm_args.py) set the weights of an
    unquantized checkpoint and a KV cache left at auto, as vLLM's --dtype does: Llama 3.1 8B's
    8,030,261,248 parameters x 4 B = 32,121,044,992 B; 262,144 B of KV per token in fp32."""
    (in_tmp / "fp32.yaml").write_text(yaml.safe_dump({"dtype": "float32"}))
    lines = (["python", "-m", "sglang.launch_server", "--model-path", "llama-3.1-8b",
              "--context-length", "4096", "--dtype", "float32"],
             ["trtllm-serve", "llama-3.1-8b", "--max_seq_len", "4096",
              "--extra_llm_api_options", "fp32.yaml"])
    for line in lines:
        out = json.loads(pasted(*line).stdout)
        assert out["weights_bytes"] == 32_121_044_992, line[0]
        assert out["kv_bytes_per_token"] == 262_144, line[0]
