"""A vLLM log's flags, settings and link as Scenario values (scenario/log_flags.py)."""

from pathlib import Path

from servecap.ledger.vllm_log import parse_vllm_log
from servecap.ledger.vllm_versions import row
from servecap.scenario.log_flags import env_graphs, env_sampler, fill, logged_values
from servecap.scenario.spec import DEFAULT, with_values

LINES = (Path(__file__).resolve().parents[1] / "fixtures" / "log_lines" /
         "v0_17_tp2_no_p2p.txt").read_text().splitlines()
NON_DEFAULT, NO_P2P, POOL = (line for line in LINES if not line.startswith("#"))



def test_a_log_fills_the_scenario_where_it_holds_the_default():
    facts = parse_vllm_log("\n".join([NON_DEFAULT, NO_P2P, POOL]))
    assert facts.enforce_eager and facts.allreduce_off == "no_p2p"
    values, notes = logged_values(facts)
    assert values["parallel.tensor_parallel_size"] == 2
    assert values["memory.gpu_memory_utilization"] == 0.2
    assert values["scheduler.max_model_len"] == 32768
    assert values["device.interconnect"] == "pcie"
    assert values["engine.enforce_eager"] is True  # modelled: no CUDA-graph pool
    assert not any("--enforce-eager" in n for n in notes)
    given = with_values(DEFAULT, {"memory.gpu_memory_utilization": 0.5})
    filled, differ = fill(given, values)
    assert filled.memory.gpu_memory_utilization == 0.5 and differ == \
        ["memory.gpu_memory_utilization"]
    assert filled.parallel.tensor_parallel_size == 2


def test_sampler_and_graph_settings_follow_the_release():
    off = parse_vllm_log("VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
                         "=0 vllm serve m\n" + POOL)
    assert env_sampler(off, row("0.21.0")) == "triton"  # FlashInfer by default: its fallback
    assert env_sampler(off, row("0.19.0")) is None  # already not FlashInfer
    assert not env_graphs(off, row("0.21.0")) and env_graphs(parse_vllm_log(POOL),
                                                             row("0.21.0"))
    on = parse_vllm_log("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 vllm serve m\n" + POOL)
    assert env_graphs(on, row("0.18.1")) and not env_graphs(on, row("0.17.1"))  # not logged


def test_a_logged_encoder_profile_plans_vllms_default_limits():
    """vLLM 0.11.0's line from v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed: the encoder was profiled
    with the defaults (no --limit-mm-per-prompt among the non-default args), so the plan holds
    that profile; a log that names a limit keeps its own."""
    line = ("(Worker_TP0 pid=41699) INFO 10-06 15:57:18 [gpu_model_runner.py:3344] Encoder cache "
            "will be initialized with a budget of 153600 tokens, and profiled with 1 video items "
            "of the maximum feature size.")
    values, notes = logged_values(parse_vllm_log("\n".join([line, POOL])))
    assert values["multimodal.limit_mm_per_prompt"] == "{}"
    assert any("Encoder cache will be initialized" in n for n in notes)
    named = NON_DEFAULT.replace("'enforce_eager': True}",
                                "'enforce_eager': True, 'limit_mm_per_prompt': {'image': 2}}")
    values, _ = logged_values(parse_vllm_log("\n".join([named, line, POOL])))
    assert values["multimodal.limit_mm_per_prompt"] != "{}"
    assert "multimodal.limit_mm_per_prompt" not in logged_values(parse_vllm_log(POOL))[0]


def test_a_cold_compile_is_said_and_a_warm_one_is_not():
    """The same RunPod worker's two 0.27.1 starts (tests/fixtures/vllm_logs/*_coldstartrecon):
    the first compiles ('Compiling a graph for compile range (1, 2048)') and logs a 1.18 GiB
    peak, the second loads the compiled graphs and logs 0.19."""
    from pathlib import Path
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
    cold = parse_vllm_log((logs / "v0_27_qwen3_8b_rtx4090_cold_coldstartrecon.log").read_text())
    warm = parse_vllm_log((logs / "v0_27_qwen3_8b_rtx4090_warm_coldstartrecon.log").read_text())
    assert (cold.cold_compile, warm.cold_compile) == (True, False)
    assert any("vllm-project/vllm#54122" in n for n in logged_values(cold)[1])
    assert not any("compiles" in n for n in logged_values(warm)[1])


V0_ARGS = ("INFO 09-20 02:21:16 api_server.py:586] args: Namespace(host=None, port=8000, "
           "enable_lora={on}, max_loras=1, max_lora_rank=16, max_cpu_loras=None, "
           "lora_dtype='auto', fully_sharded_loras=False, max_model_len=16384, "
           "gpu_memory_utilization=0.9, max_num_seqs=256, tokenizer_pool_size=0, "
           "scheduler_delay_factor=0.0)")
V0_BLOCKS = "INFO 09-20 02:22:40 gpu_executor.py:113] # GPU blocks: 4102, # CPU blocks: 4681"


def test_a_v0_namespace_leaves_the_lora_knobs_unread_when_lora_is_off():
    """V0's api_server prints every argument, its defaults among them (XtionDoubleAI/m2a
    results/vllm_server.log @ 7c094d40, tests/fixtures/vllm_logs): max_loras=1 with
    enable_lora=False is vLLM ignoring the knob, not a flag reconcile may refuse; with LoRA
    on, the knobs are read."""
    from servecap.scenario.lora import lora_spec

    def read(on: bool):
        return logged_values(parse_vllm_log("\n".join([V0_ARGS.format(on=on), V0_BLOCKS])))

    values, notes = read(False)
    assert not any(path.startswith("lora.") and path != "lora.enable_lora" for path in values)
    assert values["scheduler.max_model_len"] == 16384
    assert not any("not read: LoRA is off" in n for n in notes)  # a Namespace's defaults
    assert lora_spec(with_values(DEFAULT, values), "bf16") is None  # refused before
    # the Namespace's unmodelled arguments (defaults, mostly) are said once, not a note each
    unmodelled = [n for n in notes if "read but not modelled" in n]
    assert len(unmodelled) == 1 and unmodelled[0].startswith(
        "the log's args Namespace lists every argument, defaults among them; 2 read")
    assert "--tokenizer-pool-size" in unmodelled[0] and "--scheduler-delay-factor" in \
        unmodelled[0]
    values, notes = read(True)
    assert values["lora.enable_lora"] is True and values["lora.max_loras"] == 1
    assert values["lora.max_lora_rank"] == 16
    assert not any("not read: LoRA is off" in n for n in notes)
    # a flag the user set (0.10+'s non-default args) and vLLM ignored is said
    user = ("INFO 09-20 02:21:16 [api_utils.py:286] non-default args: {'max_loras': 4, "
            "'max_model_len': 16384}")
    values, notes = logged_values(parse_vllm_log("\n".join([user, V0_BLOCKS])))
    assert "lora.max_loras" not in values
    assert any("the log's max_loras not read: LoRA is off" in n for n in notes)


def test_the_small_batch_default_a_log_prints_brings_its_sequence_default():
    """vLLM sets max_num_batched_tokens and max_num_seqs in one branch (2,048 and 256 under its
    larger defaults; vllm/engine/arg_utils.py): a V1 log whose chunked-prefill line prints
    2,048 with no flag setting it ran the small branch, whatever its device's size (a GB10
    of 119.7 GiB under NVIDIA's 0.13.0 build, TW-10519/VLLM-ROUTER logs/vllm.log @ 43179adf)."""
    root = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
    gb10 = parse_vllm_log((root / "v0_13_gptoss20b_abliterated_mxfp4_gb10_025_vllmrouter.log")
                          .read_text())
    values, notes = logged_values(gb10)
    assert values["scheduler.max_num_batched_tokens"] == 2048
    assert values["scheduler.max_num_seqs"] == 256
    assert any("max_num_seqs comes from the same branch: planned at 256" in n for n in notes)
    # 8,192 (the larger branch, an H200 log of 0.11.2) says nothing of the sequences
    h200 = parse_vllm_log((root / "v0_11_llama3_8b_h200_faradawn.log").read_text())
    assert "scheduler.max_num_seqs" not in logged_values(h200)[0]
    # a 2,048 the user set is a flag, not the branch's default
    user = parse_vllm_log((root / "v0_13_gptoss20b_abliterated_mxfp4_gb10_025_vllmrouter.log")
                          .read_text().replace("non-default args: {", "non-default args: "
                                               "{'max_num_batched_tokens': 2048, ", 1))
    assert user.engine_version == "v1" and dict(user.args)["max_num_batched_tokens"] == 2048
    assert "scheduler.max_num_seqs" not in logged_values(user)[0]
