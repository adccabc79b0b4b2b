"""V1's PyTorch top-k/top-p sampler peaks inside logits.sort: besides the model-dtype logits and
their fp32 copy, the sort's values and int64 indices, PyTorch's int64 reverse_indices and CUB's
third keys and values buffers (ledger/vllm_row.py V1_TORCH_SAMPLER_BYTES, 38 B per logit from
128 rows). Golden figures: the pools vLLM logged on three starts whose profile sorts 1,024 rows
on that path (tests/fixtures/vllm_logs): gpt-oss-120b on one H100 at 0.10.1 (vllm#23278,
-2.14 GiB) and 0.11.0 (vllm#27508, 1.71 GiB), and Qwen3-235B-A22B-FP8 at TP 4 on 0.9.2
(vllm#21348, 178,880 tokens). Counting the sort's outputs alone (36 B) left them +0.26 GiB,
+0.41 GiB and +9.1% above the logs."""

import importlib.util
from pathlib import Path

import pytest

from servecap.ledger.vllm_profile import sampler_peak
from servecap.ledger.vllm_row import (
    FULL_SORT_SAMPLER_BYTES,
    SEGMENTED_SORT_MIN_ROWS,
    TORCH,
    TRITON,
    V1_TORCH_SAMPLER_BYTES,
)
from servecap.ledger.vllm_versions import ROWS, row

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("vllm_logs", ROOT / "bench" / "vllm_logs.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _outcome(name: str):
    return bench.evaluate(next(c for c in bench.cases() if c.name == name))


def test_the_sort_holds_its_input_outputs_reverse_indices_and_cubs_spare_buffers():
    logits, fp32, values, indices, reverse_indices, cub_keys, cub_values = 2, 4, 4, 8, 8, 4, 8
    assert V1_TORCH_SAMPLER_BYTES == (logits + fp32 + values + indices + reverse_indices
                                      + cub_keys + cub_values) == 38
    # after the sort: logits, fp32, sorted values and indices, two bool masks, the softmax
    # (cumsum written in place) and the scattered result: less than the sort held
    assert logits + fp32 + values + indices + 1 + 4 + 1 + 4 < V1_TORCH_SAMPLER_BYTES


def test_every_v1_row_sorts_with_the_same_bytes_and_v0_keeps_its_own():
    v1 = [r for r in ROWS if r.formula == "v1"]
    assert v1 and {r.sampler_bytes_per_logit for r in v1} == {V1_TORCH_SAMPLER_BYTES}
    assert {r.sampler_bytes_per_logit for r in ROWS if r.formula == "v0"} == {40}


def test_fewer_than_128_rows_sort_through_the_full_sort_and_hold_more():
    """segmented_sort_pairs_by_full_sort: two int2 arrays, the keys' output radix_sort_pairs
    allocates and CUB's third keys and int2 values buffers, in place of reverse_indices (8) and
    CUB's int64 values buffer."""
    assert SEGMENTED_SORT_MIN_ROWS == 128
    assert FULL_SORT_SAMPLER_BYTES == 2 + 4 + 4 + 8 + (8 + 8) + 4 + (4 + 8) == 50


def _gpt_oss():
    from servecap.model_configs import load_model

    return load_model("tests/fixtures/configs/openai--gpt-oss-120b").spec


@pytest.mark.parametrize("seqs, per", [(1, 38), (2, 50), (127, 50), (128, 38), (1024, 38)])
def test_the_torch_path_peak_is_rows_x_vocabulary_x_the_sorts_bytes(seqs, per):
    assert sampler_peak(_gpt_oss(), row("0.11.0"), seqs, TORCH) == seqs * 201_088 * per


def test_v0_keeps_its_later_peak_where_the_sort_holds_less():
    """V0's inverse gather after the sort (40 B) is wider from 128 rows; below, the full sort."""
    assert sampler_peak(_gpt_oss(), row("0.7.1"), 256, TORCH) == 256 * 201_088 * 40
    assert sampler_peak(_gpt_oss(), row("0.7.1"), 64, TORCH) == 64 * 201_088 * 50


def test_triton_batches_below_eight_are_sorted_by_pytorch():
    assert sampler_peak(_gpt_oss(), row("0.19.0"), 4, TRITON, 132) == 4 * 201_088 * 50


@pytest.mark.parametrize("name, within_gib", [("v1_gptoss120b_h100_issue23278", 0.15),
                                              ("v1_gptoss120b_h100_issue27508", 0.05)])
def test_gpt_oss_120b_failed_pools_are_planned_as_logged(name, within_gib):
    outcome = _outcome(name)
    assert outcome.kv_unit == "GiB" and not outcome.predicted_starts
    assert abs(outcome.predicted_kv - outcome.logged_kv) < within_gib


def test_qwen3_235b_fp8_at_tp4_on_0_9_2_is_within_6_percent():
    assert 0.05 < _outcome("v1_qwen3_235b_fp8_4xh100_issue21348").kv_error < 0.06
