"""Reading vLLM startup logs: the quoted public logs in tests/fixtures/vllm_logs."""

from pathlib import Path

import pytest

from servecap.ledger.errors import SpecError
from servecap.ledger.vllm_log import parse_vllm_log

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"


def facts(name):
    return parse_vllm_log((LOGS / f"{name}.log").read_text())


def test_every_fixture_states_its_source():
    for path in LOGS.glob("*.log"):
        head = path.read_text().splitlines()[0]
        assert head.startswith("# SOURCE:"), path.name


def test_v0_064_one_line_profile():
    f = facts("v0_llama31_8b_rtx3090")
    assert f.engine_version == "v0"
    assert (f.weights_gib, f.total_gpu_gib, f.gpu_memory_utilization) == (14.9888, 23.58, 0.9)
    assert (f.non_torch_gib, f.kv_pool_gib, f.num_gpu_blocks) == (0.35, 3.81, 1952)
    assert f.activation_peak_gib == pytest.approx(17.06 - 14.9888)  # peak includes weights
    assert (f.max_model_len, f.max_concurrency) == (20_000, 1.56)  # the first startup


def test_v0_066_profile_sentence():
    f = facts("v0_unknown_model_16gb_issue11251")
    assert (f.weights_gib, f.non_torch_gib, f.activation_gib, f.kv_pool_gib) == \
        (7.51, 0.39, 2.53, 3.76)
    assert (f.num_gpu_blocks, f.max_model_len, f.max_concurrency) == (3852, 40_000, 1.54)


def test_v0_066_profile_sentence_after_the_loading_line_is_the_same_start():
    """The profile's summary restates the weights later in the start ('Loading model weights
    took 2.8875 GB', then 'model weights take 2.89GiB; ...'): it begins no second start, so
    the blocks and concurrency lines after it are read (lennonYe/6998_project
    results/vllm_server.log @ 009c426d, vLLM 0.6.6.post1)."""
    f = facts("v0_6_6_qwen25_1p5b_44gib_lennonye")
    assert (f.weights_gib, f.non_torch_gib, f.activation_gib, f.kv_pool_gib) == \
        (2.8875, 0.23, 1.40, 35.55)
    assert (f.num_gpu_blocks, f.max_model_len, f.max_concurrency) == (83208, 4096, 325.03)


def test_the_batch_limit_is_the_one_printed_after_the_model_is_resolved():
    """0.11.2's API server prints its scheduler line twice: max_num_batched_tokens=2048 before
    'Resolved architecture', 8192 (the H200's default) after it; the engine runs the second
    (faradawn/bench3 logs/vllm_server.log @ 446e08ca)."""
    assert facts("v0_11_llama3_8b_h200_faradawn").max_num_batched_tokens == 8192
    text = "\n".join(["INFO [scheduler.py:216] Chunked prefill is enabled with "
                      "max_num_batched_tokens=2048.",
                      "INFO [gpu_model_runner.py:3338] Model loading took 14.96 GiB memory"])
    assert parse_vllm_log(text).max_num_batched_tokens == 2048  # no resolution line: as read


def test_a_blocks_override_reads_the_profiles_count_and_the_override_apart():
    """--num-gpu-blocks-override 1024 (yuanjuju/vllm-lab phase3 kv_server_constrained log @
    686c2c59, 0.29.0): 'Overriding num_gpu_blocks=8967 with num_gpu_blocks_override=1024',
    then a token line of the override's 16,384; the profile's 8,967 blocks are what the pool
    line's 19.7 GiB holds. 0.19's own profile prints 'Overriding num_gpu_blocks=0 with
    num_gpu_blocks_override=512' whatever the flags: not a user's override."""
    f = facts("v0_29_qwen3_8b_rtx4090_48gb_blocks1024_yjlab")
    assert (f.num_gpu_blocks, f.blocks_override, f.kv_pool_gib) == (8967, 1024, 19.7)
    assert f.kv_cache_tokens is None and f.max_concurrency is None  # the override's lines
    g = facts("v1_llama31_8b_h100_planner")
    assert g.blocks_override is None and g.kv_cache_tokens == 476_016
    # a user's override equal to the profile's own dummy (its max_cudagraph_capture_size, 512
    # here): the user's line is the one with a profiled count above 0
    text = (LOGS / "v1_llama31_8b_h100_planner.log").read_text().replace(
        "GPU KV cache size: 476,016 tokens",
        "Overriding num_gpu_blocks=29751 with num_gpu_blocks_override=512\n"
        "GPU KV cache size: 8,192 tokens").replace(
        "non-default args: {", "non-default args: {'num_gpu_blocks_override': 512, ", 1)
    h = parse_vllm_log(text)
    assert (h.num_gpu_blocks, h.blocks_override, h.kv_cache_tokens) == (29751, 512, None)


def test_v0_development_table():
    f = facts("v0dev_meta_llama3_8b_pr10511")
    assert (f.total_gpu_gib, f.weights_gib, f.non_torch_gib, f.activation_gib,
            f.kv_pool_gib) == (79.22, 14.96, 1.79, 1.26, 53.29)
    assert f.model == "meta-llama/Meta-Llama-3-8B"


@pytest.mark.parametrize(("name", "pool", "tokens", "max_len", "conc"), [
    ("v1_qwen3_0p6b_a100", 69.66, 652_144, 4_096, 159.21),
    ("v1_qwen3_14b_a100_40gb", 6.51, 42_656, 32_768, 1.30),
    ("v1_llama31_8b_eagle_h100", 51.63, 410_128, 131_072, 3.13),
])
def test_v1_lines(name, pool, tokens, max_len, conc):
    f = facts(name)
    assert f.engine_version == "v1"
    assert (f.kv_pool_gib, f.kv_cache_tokens, f.max_model_len, f.max_concurrency) == \
        (pool, tokens, max_len, conc)


def test_comment_lines_are_not_read():
    text = "# NOTE: Available KV cache memory: 9.99 GiB\nINFO GPU KV cache size: 1,024 tokens\n"
    f = parse_vllm_log(text)
    assert f.kv_pool_gib is None and f.kv_cache_tokens == 1024


def test_no_recognisable_line_is_an_error():
    with pytest.raises(SpecError, match="none of vLLM's startup lines"):
        parse_vllm_log("INFO starting server\nready\n", "server.log")


def test_current_one_line_kv_format():
    """vLLM 0.33 prints the cache size and the concurrency on one line."""
    f = parse_vllm_log("INFO [kv_cache_utils.py:1140] GPU KV cache size: 652,144 tokens, "
                       "Maximum concurrency for 4,096 tokens per request: 159.21x")
    assert (f.kv_cache_tokens, f.max_model_len, f.max_concurrency) == (652_144, 4_096, 159.21)


BACKENDS = ("(EngineCore pid=242) INFO 04-22 00:03:48 [platforms/cuda.py:334] Using FLASH_ATTN "
            "attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER', "
            "'TRITON_ATTN', 'FLEX_ATTENTION'].")


def test_an_attention_backend_list_naming_flashinfer_is_not_a_sampler():
    """Many fixture logs name FLASHINFER as an attention backend (vLLM 0.19's platforms/cuda.py
    list, or VLLM_ATTENTION_BACKEND=FLASHINFER); no vLLM sampler prints that, so the release's
    rule stays. A log that also carries the sampler's own line (topk_topp_sampler.py) takes the
    sampler from that line."""
    named = [n for n in sorted(LOGS.glob("*.log")) if "FLASHINFER" in n.read_text()]
    listing = [n for n in named if "topk_topp_sampler.py" not in n.read_text()]
    assert len(listing) >= 14
    for path in listing:
        f = parse_vllm_log(path.read_text())
        assert f.sampler is None, path.name
        assert not any("sampler" in x.read for x in f.lines), path.name
    for path in sorted(set(named) - set(listing)):
        text = path.read_text()
        if "Using FlashInfer for top-p & top-k sampling" in text:
            assert parse_vllm_log(text).sampler == "flashinfer", path.name
    assert parse_vllm_log(BACKENDS + "\nINFO GPU KV cache size: 1,024 tokens").sampler is None


@pytest.mark.parametrize("line, kind", [
    # vllm/v1/sample/ops/topk_topp_sampler.py @3babc05 and @01fa3fe (logger.info_once)
    ("INFO 05-09 10:18:05 [topk_topp_sampler.py:40] Using FlashInfer for top-p & top-k "
     "sampling.", "flashinfer"),
    # vLLM 0.8.5, quoted in vllm-project/vllm#17898 (topk_topp_sampler.py:69)
    ("WARNING 05-09 10:18:05 [topk_topp_sampler.py:69] FlashInfer is not available. Falling "
     "back to the PyTorch-native implementation of top-p & top-k sampling. For the best "
     "performance, please install FlashInfer.", "torch"),
    # @01fa3fe: FlashInfer the default; the fallback's native path is apply_top_k_top_p_triton
    ("WARNING 05-09 10:18:05 [topk_topp_sampler.py:170] FlashInfer top-p/top-k sampling "
     "unavailable: unsupported compute capability 7.0; falling back. Set "
     "VLLM_USE_FLASHINFER_SAMPLER=0 to silence.", "triton"),
])
def test_a_sampler_line_sets_the_sampler(line, kind):
    f = parse_vllm_log(f"{BACKENDS}\n{line}\nINFO GPU KV cache size: 1,024 tokens")
    assert f.sampler == kind
    assert [x.read for x in f.lines if "sampler" in x.read] == [f"sampler {kind}"]
