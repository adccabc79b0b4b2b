"""vLLM's rules from 0.22 to 0.33 (ledger/vllm_releases.py), each against the arithmetic of the
release's source on a real model config (tests/fixtures/configs): which model runner a release
picks, what its profile pass holds, what is subtracted, what a window reserves, the batch and
capture defaults, the hybrids' pages."""

from pathlib import Path

import pytest

from servecap.ledger.engines import EngineSpec
from servecap.ledger.kv import WHOLE
from servecap.ledger.plan import Overrides, build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import GiB
from servecap.ledger.vllm_lines import profile_batch
from servecap.ledger.vllm_profile import capture_sizes, penalties_state, sampler_peak
from servecap.ledger.vllm_releases import RELEASES
from servecap.ledger.vllm_row import TRITON
from servecap.ledger.vllm_runner import V1_RUNNER, V2_RUNNER, model_runner, window_in_flight
from servecap.ledger.vllm_versions import NEWEST, NEWEST_READ, row
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import load_model

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
H100 = 85_028_896_768  # the catalog's h100-80gb, as CUDA reports it
NO_WEIGHTS = Overrides(weights=WeightBytes(0, 0, 0, 0, ""), weights_source="test",
                       per_device=True)


def spec_of(name: str):
    return load_model(str(CONFIGS / name / "config.json")).spec


def vllm(release: str, device: str = "h100-80gb", device_bytes: int = H100, context: int = 8192,
         batched: int | None = None, **engine):
    serve = ServeSpec(device_bytes=device_bytes, context_tokens=context, concurrency=1,
                      device_label=device, max_num_batched_tokens=batched or 8192)
    return serve, EngineSpec("vllm", vllm_row=row(release), max_num_batched_tokens=batched,
                             **engine)


def plan(name: str, release: str, **kw):
    serve, engine = vllm(release, **kw)
    return build_plan(spec_of(name), serve, NO_WEIGHTS, engine=engine)


def test_rows_cover_the_releases_read_and_each_cites_its_tag() -> None:
    assert NEWEST_READ == (0, 33) and NEWEST.tag == "v0.33.0"
    assert [r.tag for r in RELEASES] == ["v0.22.0", "v0.23.0", "v0.24.0", "v0.25.0", "v0.26.0",
                                         "v0.27.0", "v0.28.0", "v0.29.0", "v0.30.0", "v0.32.0",
                                         "v0.33.0"]
    assert all("vllm/" in r.source for r in RELEASES)
    assert {r.default_gpu_memory_utilization for r in RELEASES} == {0.92}  # since 0.20
    assert row("0.31.0") is row("0.30.0") and row("0.22.1") is row("0.22.0")


# vllm/config/vllm.py use_v2_model_runner at each tag, on real configs
RUNNERS = [("Qwen--Qwen3-8B", "0.21.0", V1_RUNNER), ("Qwen--Qwen3-8B", "0.22.0", V2_RUNNER),
           ("meta-llama--Llama-3.1-8B-Instruct", "0.22.0", V1_RUNNER),
           ("meta-llama--Llama-3.1-8B-Instruct", "0.23.0", V2_RUNNER),
           ("microsoft--phi-4", "0.24.0", V1_RUNNER),  # Phi3ForCausalLM: not listed
           ("microsoft--phi-4", "0.25.0", V2_RUNNER),  # every dense model
           ("Qwen--Qwen3-30B-A3B", "0.28.0", V1_RUNNER),  # MoE, not listed
           ("Qwen--Qwen3-30B-A3B", "0.29.0", V2_RUNNER),
           ("Qwen--Qwen3-235B-A22B-FP8", "0.22.0", V1_RUNNER),
           ("Qwen--Qwen3.6-35B-A3B", "0.28.0", V1_RUNNER),  # state layers, not listed
           ("Qwen--Qwen3.6-35B-A3B", "0.29.0", V2_RUNNER),
           ("openai--gpt-oss-20b", "0.26.0", V1_RUNNER)]


@pytest.mark.parametrize(("name", "release", "runner"), RUNNERS)
def test_each_release_picks_the_model_runner_its_source_does(name, release, runner) -> None:
    assert model_runner(row(release), spec_of(name))[0] == runner
    assert model_runner(row(release), spec_of(name), V1_RUNNER)[0] == V1_RUNNER  # the env var


def test_qwen3_8b_profile_sampler_and_graphs_by_release() -> None:
    """Qwen3-8B on an H100: 1,024 sequences x 151,936 logits; the forward of 8,192 tokens
    holds 8,192 x (3 x 4,096 + 3 x 12,288) x 2 B; the sampler keeps the 8,192 x 4,096 bf16
    hidden states, and on the V1 runner its sampler inputs (their 1,024-row gather and its
    rand_like copy); PyTorch's 32 MiB cuBLAS workspace on SM 9.0 under both. 0.21:
    FlashInfer's 10 B a logit, graphs subtracted; 0.22 (V2): logits and their fp32 copy, 6 B,
    nothing subtracted; 0.28: the logits alone, so the forward is wider; 0.29: V2 measures its
    graphs; 0.33: the warm-up pass's 10 B again."""
    logits, hidden, workspace = 1024 * 151_936, 8192 * 4096 * 2, 32 * 2**20
    inputs = 2 * 1024 * 4096 * 2
    forward = 8192 * (3 * 4096 + 3 * 12_288) * 2
    expect = {"0.21.0": (logits * 10 + hidden + inputs + workspace, True),
              "0.22.0": (logits * 6 + hidden + workspace, False),
              "0.28.0": (forward + workspace, False), "0.29.0": (forward + workspace, True),
              "0.33.0": (logits * 10 + hidden + workspace, True)}
    for release, (peak, graphs) in expect.items():
        result = plan("Qwen--Qwen3-8B", release)
        assert result.line("runtime_peak") == peak, release
        assert (result.line("cuda_graphs") > 0) == graphs, release
    assert forward == 805_306_368 and logits * 6 + hidden == 1_000_603_648


def test_v2_without_graph_estimate_gives_the_pool_the_graphs_and_sampler_bytes() -> None:
    """Same GPU, same config: 0.22's pool is 0.21's plus the graph estimate no longer
    subtracted plus the sampler bytes V2 does not hold (1,024 x 151,936 x 4 B, and the V1
    runner's sampler inputs, 2 x 1,024 x 4,096 x 2 B)."""
    old, new = plan("Qwen--Qwen3-8B", "0.21.0"), plan("Qwen--Qwen3-8B", "0.22.0")
    gained = new.budget.kv_pool_bytes - old.budget.kv_pool_bytes
    assert gained == old.line("cuda_graphs") + 1024 * 151_936 * 4 + 2 * 1024 * 4096 * 2


def test_sliding_window_reserves_the_batches_in_flight_from_0_26() -> None:
    """gpt-oss-20b (12 sliding layers of 128 tokens, 12 full) at 131,072 tokens on an H100,
    T = 8,192: a sliding group holds cdiv(min(127 + T, L), 16) + 1 blocks to 0.25 and
    cdiv(min(127 + 2 T, L), 16) + 1 from 0.26 (async scheduling, V1 runner: 2 batches)."""
    full = 131_072 // 16
    before = plan("openai--gpt-oss-20b", "0.25.0", context=131_072).budget
    after = plan("openai--gpt-oss-20b", "0.26.0", context=131_072).budget
    assert before.num_groups == after.num_groups == 2
    assert before.blocks_per_request == full + -(-(127 + 8192) // 16) + 1 == 8713
    assert after.blocks_per_request == full + -(-(127 + 16_384) // 16) + 1 == 9225
    off = plan("openai--gpt-oss-20b", "0.26.0", context=131_072, async_scheduling=False)
    assert off.budget.blocks_per_request == before.blocks_per_request


def test_in_flight_batches_follow_the_runner_and_pipeline() -> None:
    """VllmConfig.max_concurrent_batches (v0.26.0): pp + 1 on V2, 2 on V1 at pp = 1, pp on V1
    with pipeline stages (no async scheduling there)."""
    r = row("0.26.0")
    assert window_in_flight(r, V2_RUNNER, 8192, pp=2)[0] == 3 * 8192
    assert window_in_flight(r, V1_RUNNER, 8192, pp=1)[0] == 2 * 8192
    assert window_in_flight(r, V1_RUNNER, 8192, pp=4)[0] == 4 * 8192
    assert window_in_flight(row("0.25.0"), V2_RUNNER, 8192, pp=2)[0] == 8192


def test_gemma_4_needs_more_blocks_a_request_from_0_26() -> None:
    """google/gemma-4-26B-A4B at 262,144 tokens and 32,768 batched tokens (the settings of
    vllm#49878): 25 sliding layers (8 heads x 256) and 5 full (2 x 512) per page unify to one
    group size of 5; a sliding group holds cdiv(1,023 + T, 16) + 1 blocks, T doubled from 0.26."""
    kw = dict(context=262_144, batched=32_768)
    before = plan("google--gemma-4-26B-A4B", "0.25.0", **kw).budget
    after = plan("google--gemma-4-26B-A4B", "0.26.0", **kw).budget
    sliding_groups = before.kinds.count("sliding")
    assert sliding_groups == 5 and before.num_groups == 6
    full = 262_144 // (before.block_size_tokens * 2)  # the full page holds twice the tokens
    assert before.blocks_per_request == full + 5 * (-(-(1023 + 32_768) // 16) + 1)
    assert after.blocks_per_request == full + 5 * (-(-(1023 + 65_536) // 16) + 1)


def test_gpus_of_160_gib_batch_16k_tokens_from_0_28() -> None:
    """vllm/engine/arg_utils.py get_batch_defaults: a B200 (180 GiB) serves 8,192 tokens to
    0.27 and 16,384 from 0.28; an H100 8,192 in both."""
    b200 = dict(device="b200-180gb", device_bytes=183_359 * 2**20 - 469 * 2**20)
    for release, tokens in (("0.27.0", 8192), ("0.28.0", 16_384)):
        serve, engine = vllm(release, **b200)
        assert profile_batch(engine, serve).tokens == tokens
        serve, engine = vllm(release)
        assert profile_batch(engine, serve).tokens == 8192


def test_sm100_captures_up_to_1024_tokens_from_0_28() -> None:
    """1, 2, 4, every 8 below 256 and every 16 from 256: 51 sizes to 512, 83 to 1,024 (Qwen3
    -30B-A3B: on the V1 runner at 0.28, whose graphs are subtracted)."""
    assert capture_sizes(1024) == (51, 51, 512)
    assert capture_sizes(1024, 1024) == (83, 83, 1024)
    b200 = dict(device="b200-180gb", device_bytes=180 * GiB)
    graphs = plan("Qwen--Qwen3-30B-A3B", "0.28.0", **b200).lines
    how = next(item.source for item in graphs if item.key == "cuda_graphs")
    assert "83 piecewise + 83 full graphs, largest 1024 tokens" in how
    h100 = plan("Qwen--Qwen3-30B-A3B", "0.28.0").lines
    assert "largest 512 tokens" in next(i.source for i in h100 if i.key == "cuda_graphs")


def test_triton_top_k_top_p_takes_every_batch_from_0_30() -> None:
    """apply_top_k_top_p: Triton (and its per-program fp32 rows) for 8 or more rows to 0.29,
    PyTorch's sort below (2 to 127 rows: segmented_sort_pairs_by_full_sort, 50 B a logit), and
    Triton for any batch from 0.30: 4 rows on an H100 keep min(4, 132) rows of 128,256 fp32
    logits."""
    spec = spec_of("meta-llama--Llama-3.1-8B-Instruct")
    triton = 4 * 128_256 * (2 + 4 + 4 + 4)
    assert sampler_peak(spec, row("0.29.0"), 4, TRITON, 132) == 4 * 128_256 * 50
    assert sampler_peak(spec, row("0.29.0"), 8, TRITON, 132) == 2 * triton + 8 * 128_256 * 4
    assert sampler_peak(spec, row("0.30.0"), 4, TRITON, 132) == triton + 4 * 128_256 * 4


def nemotron_all(release: str):
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=8192, concurrency=1,
                      runtime_peak_bytes=0, mamba_cache_mode="all")
    engine = EngineSpec("vllm", kv_cache_memory_bytes=40 * GiB, non_torch_bytes=0,
                        vllm_row=row(release))
    spec = spec_of("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    return build_plan(spec, serve, NO_WEIGHTS, WHOLE, engine).budget


def test_mamba_cache_mode_all_drops_the_chunk_alignment_at_0_32() -> None:
    """Nemotron-3-Nano: a state of 3 x (64 x 64 + 2 x 8 x 128) x 2 + 64 x 64 x 128 x 4 B over
    2 x 2 x 128 x 2 B a token: to 0.31 'all' rounds the block to lcm(chunk 128, 16) (docs
    /hybrid.md), from 0.32 as 'align' does, 16 x cdiv(state, 16 x 1,024) = 2,096."""
    state = 3 * (64 * 64 + 2 * 8 * 128) * 2 + 64 * 64 * 128 * 4
    assert nemotron_all("0.32.0").block_size_tokens == 16 * -(-state // (16 * 1024)) == 2096
    assert nemotron_all("0.31.0").block_size_tokens % 128 == 0


def test_gated_deltanet_checkpoints_align_blocks_to_64_on_hopper_from_0_33() -> None:
    """Qwen3.6-35B-A3B (align mode): the state 3 x 8,192 x 2 + 32 x 128 x 128 x 4 = 2,146,304 B
    over 2 x 2 x 256 x 2 = 2,048 B a token; on an H100 0.33's block is 64 x cdiv(state,
    64 x 2,048) with 3 state pages a request (a prefill checkpoint more); an A100 runs no
    FlashInfer GDN prefill: 16-aligned, 2 pages."""
    state, token = 2_146_304, 2048
    for device, align, pages in (("h100-80gb", 64, 3), ("a100-80gb", 16, 2)):
        serve = ServeSpec(device_bytes=H100, context_tokens=8192, concurrency=1,
                          runtime_peak_bytes=0, device_label=device)
        engine = EngineSpec("vllm", kv_cache_memory_bytes=20 * GiB, non_torch_bytes=0,
                            vllm_row=row("0.33.0"))
        result = build_plan(spec_of("Qwen--Qwen3.6-35B-A3B"), serve, NO_WEIGHTS, WHOLE,
                            engine).budget
        block = align * -(-state // (align * token))
        assert result.block_size_tokens == block, device
        assert result.blocks_per_request == -(-8192 // block) + 3 * pages, device


def test_the_consumed_profile_plans_as_the_profiled_one() -> None:
    """0.27's memory_profiling counts the same lines a different way (the free-memory drop
    since the snapshot + the transient peak): the same plan as 0.26 for the same runner, but
    for the torch buffers Model Runner V2 makes after loading, which the drop counts and 0.26's
    torch-peak increase does not: its penalties state, on the non-torch line."""
    def amounts(release: str):
        return {item.key: item.num_bytes for item in plan("Qwen--Qwen3-8B", release).lines}
    before, after = amounts("0.26.0"), amounts("0.27.0")
    state = penalties_state(spec_of("Qwen--Qwen3-8B"), 1024)  # an H100's 1,024 sequences
    assert after["non_torch"] - before["non_torch"] == state
    moved = {"non_torch", "kv_pool_spare"}
    assert {k: v for k, v in before.items() if k not in moved} == \
        {k: v for k, v in after.items() if k not in moved}
    assert abs(before["kv_pool_spare"] - after["kv_pool_spare"] - state) < 2 * 2**20  # blocks
