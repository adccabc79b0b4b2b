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
