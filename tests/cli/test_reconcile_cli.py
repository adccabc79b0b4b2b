"""`servecap reconcile` on real vLLM logs quoted from public issues (tests/fixtures/vllm_logs)."""

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
runner = CliRunner()


def reconcile_path(path, *args, code=None):
    """code: the exit expected (0 agrees, 1 disagrees); None: either, never 2 or a crash."""
    result = runner.invoke(app, ["reconcile", str(path), *args, "--json"])
    assert result.exit_code in ((0, 1) if code is None else (code,)), result.output
    return json.loads(result.stdout)


def reconcile(log, *args, code=None):
    report = reconcile_path(LOGS / f"{log}.log", *args, code=code)
    return {row["key"]: row for row in report["rows"]}


def test_v0_log_lines_and_the_arithmetic_matching_vllm():
    rows = reconcile("v0_llama31_8b_rtx3090", "--model", "llama-3.1-8b")
    # checkpoint + vLLM's rotary cache (131,072 positions x 128 x 2 B) = the logged 14.9888 GiB
    assert rows["weights"]["predicted"] == 16_060_522_496 + 131_072 * 128 * 2
    assert rows["weights"]["advice"] == "matches"
    # 0.6.4 profiles max(max_model_len, 2048) = 20,000 tokens: the forward is the peak
    assert abs(rows["runtime_peak"]["residual"]) <= 0.02 * 2**30
    replanned = rows["kv_pool_replanned"]
    assert abs(replanned["residual"]) <= 0.01 * 2**30
    assert replanned["advice"] == "servecap's arithmetic matches vLLM's"
    assert "the logged count among them" in rows["num_gpu_blocks"]["advice"]
    assert rows["starts"]["predicted"] == rows["starts"]["logged"] == 1


def test_the_log_format_names_the_release_when_no_version_is_printed():
    report = reconcile_path(LOGS / "v0_llama31_8b_rtx3090.log", "--model", "llama-3.1-8b")
    assert any("vllm>=0.6.4,<0.6.5" in n and "0.6.4's" in n for n in report["notes"])


def test_v0_refusal_is_read_and_predicted():
    """29,000 tokens > 1,478 blocks x 16: the V0 token line is read and the plan refuses."""
    rows = reconcile("v0_llama31_8b_rtx3090_29k", "--model", "llama-3.1-8b")
    assert rows["v0_max_tokens"]["logged"] == 23_648
    assert rows["starts"]["predicted"] == rows["starts"]["logged"] == 0
    assert "max_model_len exceeds the KV cache" in rows["starts"]["advice"]


def test_v1_log_blocks_tokens_and_concurrency():
    rows = reconcile("v1_qwen3_14b_a100_40gb", "--model", "qwen3-14b", "--device", "a100-40gb",
                     "--engine", "vllm==0.10.2")
    assert rows["kv_cache_tokens"]["logged"] == 42_656
    assert rows["num_gpu_blocks"]["logged"] == 2_666
    assert "2,664-2,668 blocks of 2,621,440 B" in rows["num_gpu_blocks"]["advice"]
    assert rows["max_concurrency"]["logged"] == 1.30


def test_unexplained_block_bytes_are_not_blamed_on_a_draft():
    """Issue 19996's log shows no draft model: the extra 3.1% per block is reported as not
    explained by the log, not guessed at."""
    result = runner.invoke(app, ["reconcile", str(LOGS / "v1_llama31_8b_eagle_h100.log"),
                                 "--model", "llama-3.1-8b", "--device", "h100-80gb",
                                 "--engine", "vllm==0.9.1"])
    assert result.exit_code in (0, 1)
    flat = " ".join(result.output.split())
    assert "3.1% more bytes" in flat and "no line of the log explains it" in flat
    assert "draft" not in flat and "EAGLE" not in flat


def test_a_draft_the_log_shows_is_named(tmp_path):
    text = (LOGS / "v1_llama31_8b_eagle_h100.log").read_text() + \
        ("INFO [core.py] Initializing a V1 LLM engine with config: "
         "speculative_config={'method': 'eagle'}\n")
    log = tmp_path / "eagle.log"
    log.write_text(text)
    report = reconcile_path(log, "--model", "llama-3.1-8b", "--device", "h100-80gb")
    assert any("shows speculative decoding" in n for n in report["notes"])


def test_negative_pool_and_failed_start_are_read():
    """Issue 23278: 'Available KV cache memory: -2.14 GiB' then 'EngineCore failed to start'."""
    report = reconcile_path(LOGS / "v1_gptoss120b_h100_issue23278.log", "--model",
                            str(LOGS.parent / "configs" / "openai--gpt-oss-120b"), "--device",
                            "h100-80gb", "--engine", "vllm==0.10.1")
    rows = {row["key"]: row for row in report["rows"]}
    assert rows["kv_pool"]["logged"] == round(-2.14 * 2**30)
    assert rows["kv_pool"]["predicted"] < 0
    assert rows["starts"]["logged"] == rows["starts"]["predicted"] == 0
    assert "matches (with vLLM's resident layout)" == rows["weights"]["advice"]
    read = {line["line"]: line["read"] for line in report["lines_read"]}
    assert "MXFP4 kernel marlin" in read[11] and "EngineCore failed to start" in read[18]


def test_every_memory_line_is_listed(tmp_path):
    log = tmp_path / "v.log"
    log.write_text("INFO [gpu_worker.py] Available KV cache memory: 5.00 GiB\n"
                   "INFO [worker.py] some other memory figure 3 GiB\n"
                   "INFO starting\n")
    report = reconcile_path(log, "--model", "llama-3.1-8b", "--device", "h100-80gb",
                            "--max-model-len", "8192", code=1)
    lines = {x["line"]: x["read"] for x in report["lines_read"]}
    assert lines == {1: "kv_pool_gib", 2: ""}


def test_kv_connectors_are_named_as_unknown_memory(tmp_path):
    """LMCache issue 1739 ran with LMCache; a log that says so gets it named, not explained."""
    log = tmp_path / "lmcache.log"
    log.write_text((LOGS / "v1_qwen3_14b_a100_40gb.log").read_text() + "INFO [factory.py] "
                   "Creating v1 connector with name: LMCacheConnectorV1\n")
    report = reconcile_path(log, "--model", "qwen3-14b", "--device", "a100-40gb",
                            "--engine", "vllm==0.10.2")
    assert any("KV connector LMCacheConnectorV1" in n and "unknown memory" in n
               for n in report["notes"])


def test_v1_estimated_max_model_len_is_reproduced():
    """Issue 25350: vLLM's own estimate for its 5.59 GiB pool is 122,080 tokens; servecap's
    arithmetic over the same pool (a 48-layer, 4-KV-head fp8 model) agrees to rounding."""
    rows = reconcile("v1_fp8kv_221k_issue25350", "--model", "qwen3-30b-a3b", "--device",
                     "h100-80gb", "--kv-cache-dtype", "fp8", "--engine", "vllm==0.10.2")
    assert rows["estimated_max_len"]["advice"] == "matches, to the pool's rounding"
    assert rows["starts"]["predicted"] == rows["starts"]["logged"] == 0


def test_per_rank_pools_take_the_smallest(tmp_path):
    log = tmp_path / "tp.log"
    log.write_text("(Worker_TP0 pid=1) INFO [gpu_worker.py] Available KV cache memory: 20.50 GiB\n"
                   "(Worker_TP1 pid=2) INFO [gpu_worker.py] Available KV cache memory: 19.75 GiB\n")
    report = reconcile_path(log, "--model", "llama-3.1-8b", "--device", "h100-80gb",
                            "--max-model-len", "8192", "-tp", "2")
    rows = {row["key"]: row for row in report["rows"]}
    assert rows["kv_pool"]["logged"] == round(19.75 * 2**30)
    assert "the smallest" in rows["kv_pool_rank1"]["advice"]
    assert "above the smallest" in rows["kv_pool_rank0"]["advice"]


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
    assert "--engine sglang or --engine trtllm" in result.stderr  # the other logs it reads
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
    blocks); its non-torch line already holds the collective buffers."""
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


def test_cuda_graph_estimate_is_taken_out_of_the_pool_from_0_20(tmp_path):
    """vLLM >= 0.20 subtracts its 'Estimated CUDA graph memory' from the KV budget; 0.18-0.19
    print it without subtracting (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). 0.20 against
    0.18: both sample with Triton, so the graphs are the only difference in the pool."""
    log = tmp_path / "v1.log"
    log.write_text(
        "INFO [gpu_model_runner.py] Model loading took 14.99 GiB and 3.1 seconds\n"
        "INFO [gpu_worker.py] Estimated CUDA graph memory: 0.64 GiB total\n"
        "INFO [gpu_worker.py] Available KV cache memory: 56.84 GiB\n")
    new = {r["key"]: r for r in reconcile_path(
        log, "--model", "llama-3.1-8b", "--device", "h100-80gb", "--max-model-len", "8192",
        "--engine", "vllm==0.20", "--gpu-memory-utilization", "0.9")["rows"]}
    old = {r["key"]: r for r in reconcile_path(
        log, "--model", "llama-3.1-8b", "--device", "h100-80gb", "--max-model-len", "8192",
        "--engine", "vllm==0.18", "--gpu-memory-utilization", "0.9")["rows"]}
    assert new["cuda_graphs"]["logged"] == round(0.64 * 2**30) > 0
    assert old["kv_pool_replanned"]["predicted"] - new["kv_pool_replanned"]["predicted"] == \
        round(0.64 * 2**30)
    assert old["cuda_graphs"]["predicted"] == 0 and "does not subtract" in \
        old["cuda_graphs"]["advice"]


def test_reconcile_refuses_another_engines_log() -> None:
    """A vLLM log read as SGLang's would be compared against the wrong formula: SGLang's reader
    finds none of its lines and says which engine reads it."""
    result = runner.invoke(app, ["reconcile", str(LOGS / "v0_llama31_8b_rtx3090.log"),
                                 "--model", "llama-3.1-8b", "--engine", "sglang",
                                 "--mem-fraction-static", "0.8", "--device", "24GiB"])
    assert result.exit_code == 2
    assert "none of sglang's KV cache lines" in result.stderr and "--engine vllm" in \
        result.stderr


CONFIGS = LOGS.parent / "configs"


def plan_json(*args):
    result = runner.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_reconcile_predicts_what_plan_gives_for_the_same_setup():
    """The H100 Llama-3.1-8B log (vLLM 0.19.0, utilization 0.95, 8,192 tokens) prints no
    sampler line, so 0.19's Triton rule holds: reconcile's activation peak and KV tokens are
    plan's, 476,000 tokens (docs/reconcile.md) against the logged 476,016."""
    setup = ("--device", "h100-80gb", "--engine", "vllm==0.19.0")
    rows = reconcile("v1_llama31_8b_h100_planner", "--model", "llama-3.1-8b", *setup)
    plan = plan_json("llama-3.1-8b", *setup, "--gpu-memory-utilization", "0.95",
                     "--context", "8192")
    assert rows["runtime_peak"]["predicted"] == plan["runtime_peak_bytes"]
    assert rows["kv_cache_tokens"]["predicted"] == plan["kv_cache_tokens"] == 476_000
    assert rows["kv_cache_tokens"]["logged"] == 476_016


def test_tensor_parallel_prediction_counts_the_collective_buffers_plan_counts():
    """Qwen2.5-72B at tp 2 on H100s (NVLink): plan counts 1.81 GiB of communication buffers;
    reconcile plans the same (20,656 tokens, the log 19,920) and sets its non-torch and
    collective lines beside the log's non-torch figure, which holds them (2.09 GiB)."""
    model = str(CONFIGS / "Qwen--Qwen2.5-72B-Instruct")
    setup = ("--device", "h100-80gb", "-tp", "2")
    rows = reconcile("v1_qwen25_72b_2xh100_planner", "--model", model, *setup)
    plan = plan_json(model, *setup, "--engine", "vllm==0.19.0", "--gpu-memory-utilization",
                     "0.95", "--context", "8192")
    lines = {line["key"]: line["bytes"] for line in plan["lines"]}
    assert lines["comm_buffers"] == round(1.8125 * 2**30)
    assert rows["non_torch"]["predicted"] == lines["non_torch"] + lines["comm_buffers"]
    assert abs(rows["non_torch"]["residual"]) < 0.05 * 2**30
    assert rows["kv_cache_tokens"]["predicted"] == plan["kv_cache_tokens"] == 20_656


def test_a_device_read_from_the_log_says_which_gpus_have_its_size():
    """79.19 GiB is both H100s' CUDA total in the catalog: the bare size has no SM count and no
    interconnect, so reconcile says so and which --device to give."""
    report = reconcile_path(LOGS / "v1_qwen25_72b_2xh100_planner.log", "--model",
                            str(CONFIGS / "Qwen--Qwen2.5-72B-Instruct"), "-tp", "2")
    note = next(n for n in report["notes"] if n.startswith("device:"))
    assert "79.19 GiB" in note and "h100-80gb, h100-pcie-80gb" in note and "PCIe" in note


CONFIGS = LOGS.parent / "configs"


def test_a_log_without_a_version_is_read_with_the_release_its_lines_place():
    """gpt-oss-120b on an H100 at utilization 0.95 (vllm#27508): the log prints no version;
    its lines are where vLLM 0.11.0 prints them, whose rules leave the pool short of one
    131,072-token request, as vLLM found. The newest rules said it fits."""
    report = reconcile_path(LOGS / "v1_gptoss120b_h100_issue27508.log", "--model",
                            str(CONFIGS / "openai--gpt-oss-120b"), "--device", "h100-80gb",
                            code=0)
    rows = {row["key"]: row for row in report["rows"]}
    assert rows["starts"]["predicted"] == rows["starts"]["logged"] == 0
    assert any(n.startswith("rules: vllm>=0.11.0,<0.11.2") and "[gpu_worker.py:298, "
               "core.py:708] are where vLLM 0.11.0 prints them" in n for n in report["notes"])


def test_a_config_whose_name_differs_from_the_logged_model_is_trusted_and_noted(tmp_path):
    config = tmp_path / "my-renamed-copy"
    config.mkdir()
    (config / "config.json").write_text((CONFIGS / "Qwen--Qwen3-0.6B" / "config.json")
                                        .read_text())
    report = reconcile_path(LOGS / "v1_qwen3_0p6b_a100.log", "--model", str(config),
                            "--device", "a100-80gb")
    assert any("the log loads 'Qwen/Qwen3-0.6B'" in n and "the config is trusted" in n
               for n in report["notes"])
    rows = {row["key"]: row for row in report["rows"]}
    assert abs(rows["kv_cache_tokens"]["residual"]) <= 0.05 * rows["kv_cache_tokens"]["logged"]


def test_uneven_pipeline_stages_are_each_set_beside_their_own_pool(tmp_path):
    """Llama-3.1-8B at pp 3 on H100s: 11, 11 and 10 layers. The last stage logs the smallest
    pool, yet its 10-layer blocks are smaller, so stage 0 binds (vLLM gives every stage the
    fewest blocks). Each stage's row holds its own planned pool, and the blocks are checked
    against the binding stage's pool: the log reads as this layout, not another. The lines are
    vLLM 0.19's wording; the figures, plan's, as each stage would log them."""
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags, deployment_from_flags

    planned = deployment_from_flags("llama-3.1-8b", PlanFlags(device="h100-80gb",
                                                              context=8192, concurrency=1),
                                    DeployFlags(pipeline_parallel_size=3,
                                                engine="vllm==0.19"))
    pools = [stage.plan.budget.kv_pool_bytes / 2**30 for stage in planned.stages]
    tokens = planned.plan.budget.kv_cache_tokens
    lines = [f"(Worker_PP{i} pid=44{i}) INFO 04-22 01:43:10 [v1/worker/gpu_worker.py:436] "
             f"Available KV cache memory: {pool:.2f} GiB" for i, pool in enumerate(pools)]
    lines.append(f"(EngineCore pid=243) INFO 04-22 01:43:15 [v1/core/kv_cache_utils.py:1319] "
                 f"GPU KV cache size: {tokens:,} tokens")
    log = tmp_path / "pp3.log"
    log.write_text("\n".join(lines) + "\n")
    rows = reconcile_path(log, "--model", "llama-3.1-8b", "--device", "h100-80gb",
                          "--engine", "vllm==0.19", "-pp", "3", "--max-model-len", "8192")
    rows = {row["key"]: row for row in rows["rows"]}
    assert min(pools) == pools[2] and planned.binding == 0
    for i in range(len(pools)):
        assert rows[f"kv_pool_rank{i}"]["predicted"] == \
            planned.stages[i].plan.budget.kv_pool_bytes
        assert abs(rows[f"kv_pool_rank{i}"]["residual"]) <= 0.005 * 2**30
    assert "the logged count among them" in rows["num_gpu_blocks"]["advice"]
    assert "another KV layout" not in json.dumps(rows)


def test_the_log_lines_read_wrap_under_their_text(run) -> None:
    """Each log line read is listed with its number; a long one wrapped to column 0, where
    it read as a line of servecap's own."""
    log = LOGS / "v1_qwen3_14b_a100_40gb.log"
    out = run("reconcile", log, "--model", "qwen3-14b", "--device", "a100-40gb", "--engine",
              "vllm==0.10.2")
    lines = out.stdout.splitlines()
    start = lines.index("read 3 memory lines of the log:")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("the plan "))
    listed = lines[start + 1:end]
    assert len(listed) > 3 and all(len(line) <= 80 for line in listed), listed
    for line in listed:
        assert re.match(r"  +\d+: ", line) or line.startswith(" " * 8), listed
