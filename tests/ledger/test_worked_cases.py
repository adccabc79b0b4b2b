"""Golden numbers from the seeds' worked cases, reproduced exactly."""

from dataclasses import replace

from servecap.ledger.model import Attention, ModelSpec
from servecap.ledger.paging import paging_report
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import GiB
from servecap.model_configs import load_model

TEACHING = load_model("teaching-7b").spec


def teaching_serve(**changes) -> ServeSpec:
    base = ServeSpec(device_bytes=40 * GiB, context_tokens=4096, concurrency=16,
                     runtime_peak_bytes=3 * GiB, safety_bytes=4 * GiB)
    return replace(base, **changes)


def test_seed000_teaching_ledger_line_by_line() -> None:
    plan = build_plan(TEACHING, teaching_serve())
    assert plan.line("weights") == 14_000_000_000
    assert round(plan.line("weights") / GiB, 2) == 13.04
    assert plan.line("weight_metadata") == 0
    assert plan.kv_bytes_per_token == 131_072 == 128 * 1024
    assert plan.kv_bytes_per_request == 536_870_912
    assert plan.line("kv_cache") == 8 * GiB
    assert plan.line("runtime_peak") == 3 * GiB and plan.line("safety") == 4 * GiB
    assert round(plan.committed_bytes / GiB, 2) == 28.04
    assert plan.memory_ceiling_requests == 39
    assert plan.fits


def test_seed000_paging_rounding_at_16_and_4_token_blocks() -> None:
    at16 = paging_report([17, 33, 65], 16)
    assert (at16.logical_tokens, at16.num_blocks, at16.slot_tokens) == (115, 10, 160)
    assert at16.unused_slot_tokens == 45 and at16.stored_tokens == 115
    at4 = paging_report([17, 33, 65], 4)
    assert (at4.slot_tokens, at4.block_table_entries) == (124, 31)


def seed004_serve() -> ServeSpec:
    return ServeSpec(device_bytes=80 * GiB, context_tokens=4096, concurrency=1,
                     runtime_peak_bytes=0, safety_bytes=8 * GiB, safety_fraction=0.10)


def test_seed004_plan_with_32_kv_heads() -> None:
    mha = replace(TEACHING, attention=Attention("gqa", 32, 32, 128))
    plan = build_plan(mha, seed004_serve())
    assert plan.kv_bytes_per_token == 524_288  # 0.5 MiB
    assert plan.kv_bytes_per_request == 2 * GiB
    assert plan.memory_ceiling_requests == 29


def test_seed004_plan_with_8_kv_heads_is_exactly_117_not_about_118() -> None:
    plan = build_plan(TEACHING, seed004_serve())
    assert plan.kv_bytes_per_request == GiB // 2
    # (72 GiB - 14e9 B) / 0.5 GiB = 117.92: the seed's "about 118" rounds the weights to 13 GiB.
    assert plan.memory_ceiling_requests == 117


def test_weights_that_do_not_fit_give_ceiling_zero_not_negative() -> None:
    plan = build_plan(TEACHING, teaching_serve(device_bytes=12 * GiB))
    assert plan.memory_ceiling_requests == 0
    assert not plan.fits and plan.free_bytes < 0
    assert any("weights alone do not fit" in note for note in plan.notes)


def test_mixed_batch_uses_sum_of_paged_live_lengths() -> None:
    plan = build_plan(TEACHING, teaching_serve(lengths=(17, 33, 65)))
    assert plan.line("kv_cache") == 160 * 131_072  # 10 blocks x 16 slots


def test_shared_prefix_full_blocks_are_stored_once() -> None:
    alone = build_plan(TEACHING, teaching_serve(concurrency=4, context_tokens=100))
    shared = build_plan(TEACHING, teaching_serve(concurrency=4, context_tokens=100,
                                                 shared_prefix_tokens=40))
    # 40 shared tokens = 2 full 16-token blocks, stored once instead of 4 times.
    assert alone.line("kv_cache") - shared.line("kv_cache") == 3 * 2 * 16 * 131_072
    assert shared.paging.shared_blocks == 2


def test_kv_only_spec_needs_no_architecture() -> None:
    spec = ModelSpec("kv-only", "test", 2, Attention("gqa", 4, 2, 8), num_parameters=1000)
    plan = build_plan(spec, ServeSpec(device_bytes=GiB, context_tokens=16, concurrency=1,
                                      runtime_peak_bytes=0, safety_bytes=0))
    assert plan.kv_bytes_per_token == 2 * 2 * 2 * 8 * 2
