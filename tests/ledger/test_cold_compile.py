"""A cold torch.compile's peak in vLLM's profile (ledger/vllm_profile.py compile_benchmark_peak):
from 0.11.1 Inductor benchmarks the embedding gather on a random copy of the whole table, which
vLLM charges as activation. Golden figures: the cold starts' own 'peak activation' lines
(tests/fixtures/vllm_logs: Qwen3-8B on 0.27.1, 1.18 GiB; Llama-3.1-8B on 0.26.0, 1.01 GiB, the
same with INT4 weights, so the table, not the weights, sets it)."""

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from servecap.ledger.kv import WHOLE, Shard
from servecap.ledger.units import GiB
from servecap.ledger.vllm_batch import Batch
from servecap.ledger.vllm_profile import activation_estimate, compile_benchmark_peak
from servecap.ledger.vllm_versions import ROWS, row
from servecap.model_configs import load_model

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
BATCH = Batch(2048, 256, "vllm serve on a < 70 GiB GPU")


def spec_of(name: str):
    return load_model(str(CONFIGS / name / "config.json")).spec


def test_the_peak_is_the_table_and_one_output_as_the_cold_logs_print():
    qwen, llama = spec_of("Qwen--Qwen3-8B"), spec_of("meta-llama--Llama-3.1-8B-Instruct")
    assert compile_benchmark_peak(qwen, WHOLE, 2048) == (151_936 + 2048) * 4096 * 2
    assert abs(compile_benchmark_peak(qwen, WHOLE, 2048) / GiB - 1.18) < 0.01
    assert abs(compile_benchmark_peak(llama, WHOLE, 2048) / GiB - 1.01) < 0.02


def test_tensor_parallel_ranks_hold_their_shard_and_later_stages_none():
    qwen = spec_of("Qwen--Qwen3-32B")
    whole = compile_benchmark_peak(qwen, WHOLE, 8192)
    half = compile_benchmark_peak(qwen, Shard(tensor_parallel_size=2), 8192)
    assert half == (151_936 // 2 + 8192) * 5120 * 2 < whole
    assert compile_benchmark_peak(qwen, Shard(first_stage=False), 8192) == 0


def test_only_a_cold_start_on_a_release_that_benchmarks_kernels_pays_it():
    qwen = spec_of("Qwen--Qwen3-8B")
    for release, benchmarks in (("0.11.0", False), ("0.11.2", True), ("0.19.0", True),
                                ("0.27.1", True), ("0.33.0", True)):
        r = row(release)
        warm, _ = activation_estimate(qwen, WHOLE, r, BATCH)
        cold, how = activation_estimate(qwen, WHOLE, r, BATCH, cold_compile=True)
        assert r.compile_benchmarks_kernels == benchmarks, release
        if benchmarks:
            # the wider of the pass and the compile (0.11.2's PyTorch-sort sampler is wider)
            assert cold == max(warm, compile_benchmark_peak(qwen, WHOLE, BATCH.tokens))
            assert cold > warm or release == "0.11.2"
            assert "cold torch.compile" in how and "random copy of the table" in how
        else:
            assert (cold, how) == (warm, _)


@given(st.sampled_from([r for r in ROWS if r.formula == "v1"]), st.integers(1, 8),
       st.sampled_from([512, 2048, 8192, 16384]), st.booleans())
def test_a_cold_start_never_plans_less_activation(r, tp, tokens, first):
    qwen = spec_of("Qwen--Qwen3-8B")
    shard = Shard(tensor_parallel_size=tp, first_stage=first)
    batch = Batch(tokens, 256, "given")
    warm, _ = activation_estimate(qwen, shard, r, batch)
    cold, _ = activation_estimate(qwen, shard, r, batch, cold_compile=True)
    assert cold >= warm
    assert cold == warm or cold == compile_benchmark_peak(qwen, shard, tokens)
