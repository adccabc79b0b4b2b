"""What vLLM's start-up holds beside the pool: the Triton sampler's per-program buffer and the
check that what runs after the pool (CUDA-graph capture, the sampler warm-up) fits the rest."""

from servecap.ledger.devices import SM_COUNTS, sm_count
from servecap.ledger.model import ModelSpec
from servecap.ledger.vllm_profile import TRITON, sampler_peak, triton_buffer
from servecap.ledger.vllm_versions import row

VOCAB = 152_064  # Qwen2.5's


def _spec() -> ModelSpec:
    from servecap.model_configs import load_model

    return load_model("tests/fixtures/configs/Qwen--Qwen2.5-7B-Instruct").spec


def test_the_triton_buffer_is_one_fp32_row_per_program_capped_at_the_sm_count():
    spec = _spec()
    assert spec.vocab_size == VOCAB
    # 1,024 requests on an H100 (132 SMs): min(next power of 2 of 132, 132) = 132 rows
    assert triton_buffer(spec, 1024, 132) == 132 * VOCAB * 4
    # 100 requests: 100 programs, a buffer of min(128, 132) rows
    assert triton_buffer(spec, 100, 132) == 128 * VOCAB * 4
    # under 8 requests vLLM sorts with PyTorch: no buffer; unknown SM count: none planned
    assert triton_buffer(spec, 7, 132) == 0
    assert triton_buffer(spec, 1024, None) == 0


def test_the_triton_path_holds_the_buffer_and_the_others_do_not():
    spec, r = _spec(), row("0.19.0")
    assert r.sampler == TRITON
    plain = sampler_peak(spec, r, 1024, TRITON)
    assert sampler_peak(spec, r, 1024, TRITON, 132) - plain == 132 * VOCAB * 4
    assert sampler_peak(spec, r, 1024, "flashinfer", 132) == sampler_peak(spec, r, 1024,
                                                                          "flashinfer")


def test_sm_counts_resolve_from_a_device_label():
    assert sm_count("NVIDIA H100 80GB HBM3 (h100-80gb)") == 132
    assert sm_count("h100-pcie-80gb") == 114
    assert sm_count("48GiB") is None
    assert all(40 <= n <= 200 for n in SM_COUNTS.values())


LLAMA = "tests/fixtures/configs/meta-llama--Llama-3.1-8B-Instruct"


def _plan(*extra: str):
    import json

    from typer.testing import CliRunner

    from servecap.cli.app import app

    result = CliRunner().invoke(app, ["plan", LLAMA, "--device", "h100-80gb", "--engine",
                                      "vllm==0.19", "--context", "8192", "--json", *extra])
    return result.exit_code, json.loads(result.stdout)


def test_a_pool_that_holds_the_request_still_fails_when_the_warm_up_has_no_room():
    """At 0.99 of an H100 the 1% outside the budget, less the CUDA context, plus the profile's
    freed activations cannot hold the graphs and the 1,024-request sampler warm-up."""
    code, out = _plan("--gpu-memory-utilization", "0.99")
    assert code == 1 and out["starts"] is False
    advice = out["start_advice"]
    assert advice["max_model_len"] is None  # a shorter request would not help
    assert advice["gpu_memory_utilization"] < 0.99 and advice["max_num_seqs"] < 1024
    assert "sampler warm-up" in advice["text"] and "--enforce-eager" in advice["text"]
    # each figure of the advice starts, as fit's search found it
    assert _plan("--gpu-memory-utilization", str(advice["gpu_memory_utilization"]))[0] == 0
    assert _plan("--gpu-memory-utilization", "0.99", "--max-num-seqs",
                 str(advice["max_num_seqs"]))[0] == 0
    assert _plan("--gpu-memory-utilization", "0.99", "--max-num-seqs",
                 str(advice["max_num_seqs"] + 1))[0] == 1


def test_the_after_pool_room_is_what_the_pool_leaves_less_what_precedes_the_baseline():
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags
    from servecap.cli.plan_cmd import deployment_from_flags
    from servecap.ledger.vllm_after import CUDA_CONTEXT

    plan = deployment_from_flags(LLAMA, PlanFlags(device="h100-80gb", context=8192),
                                 DeployFlags(engine="vllm==0.19")).plan
    after = plan.after_pool
    held = sum(plan.line(k) for k in ("weights", "weight_metadata", "weights_resident",
                                      "rotary_cache", "non_torch", "comm_buffers"))
    pool = plan.budget.num_gpu_blocks * plan.budget.block_bytes
    assert after.outside_bytes == CUDA_CONTEXT
    assert after.room_bytes == plan.device_bytes - held - pool - CUDA_CONTEXT
    assert after.fits and plan.starts
