"""gpt-oss's own CUDA-graph capture limit (GptOssForCausalLMConfig), which the graph estimate
and the room after the pool use."""

from servecap.ledger.units import GiB


def test_gpt_oss_captures_graphs_to_1024_tokens_from_the_0_11_row():
    """GptOssForCausalLMConfig raises the largest capture size from 512 to 1,024 where none is
    set (vllm/model_executor/models/config.py at v0.11.1 through v0.33.0; the capture list at
    v0.10.1-v0.11.0). Golden: llm-d-planner's gpt-oss-20b on one H100, vLLM 0.19.0, logs
    'Overriding max cuda graph capture size to 1024', profiles 83 + 83 graphs and captures
    1.84 GiB."""
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags, deployment_from_flags
    from servecap.ledger.vllm_profile import capture_sizes

    def graphs(model: str, engine: str) -> int:
        plan = deployment_from_flags(
            f"tests/fixtures/configs/{model}",
            PlanFlags(device="h100-80gb", context=8192, concurrency=1),
            DeployFlags(engine=engine, gpu_memory_utilization=0.95)).plan
        return plan.after_pool.graphs_bytes

    # the log: 'Profiling CUDA graph memory: PIECEWISE=83 (largest=1024), FULL=83 (largest=1024)'
    assert capture_sizes(1024, 1024) == (83, 83, 1024)
    assert capture_sizes(1024, 512) == (51, 51, 512)
    oss = graphs("openai--gpt-oss-20b", "vllm==0.19.0")
    assert 1.0 * GiB < oss < 1.84 * GiB  # 1.07 planned; vLLM's estimate 1.30, captured 1.84
    assert graphs("openai--gpt-oss-20b", "vllm==0.9.2") < oss  # the 0.9.2 row: 512
    # another architecture keeps 512 on the same release
    qwen = graphs("Qwen--Qwen3-32B", "vllm==0.19.0")
    assert qwen > 0
