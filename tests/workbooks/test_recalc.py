"""LibreOffice recalculates every workbook to exactly the bytes and ceilings servecap plans."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas
import pytest
from conftest import (
    BUNDLED,
    CLASS_DEFAULTS,
    HYBRID_RANDOM_EDITS,
    HYBRIDS,
    RANDOM_EDITS,
    Case,
    cached_mismatches,
)
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.plan_json import plan_to_dict
from servecap.ledger.paging import paging_report
from servecap.ledger.plan import build_plan, with_device
from servecap.workbooks.names import cell_of
from servecap.workbooks.paging_sheet import block_sizes
from servecap.workbooks.source import cache_bytes_per_request

LINE_NAMES = {"weights": "weights_bytes", "weight_metadata": "weight_metadata_line_bytes",
              "runtime_peak": "runtime_peak_line_bytes", "kv_cache": "kv_cache_bytes",
              "safety": "safety_line_bytes"}
CACHE_NAMES = {"indexer_cache": "indexer_cache_bytes", "state_cache": "state_cache_bytes"}
EDITED = ["edit-llama-context", "edit-gemma-context", "edit-teaching-device",
          "edit-qwen36-load", "edit-nemotron-device", "edit-llama4-context",
          "edit-deepseek32-dtype", "edit-gemma4-block"]
VARIANTS = ["llama-int4-fp8kv", "llama-lengths-prefix", "gptoss-lengths-window",
            "deepseek-fp8kv", "gemma-mixed", "envelope", "model-dir", "qwen36-lengths-prefix",
            "nemotron-int8kv", "llama4-past-chunk", "llama4-lengths", "deepseek32-lengths",
            "gemma4-mixed", "envelope-hybrid", "gemma4-31b-nvfp4", "qwen36-27b-mixed-formats"]


def _exact(value, expected: int) -> None:
    """Integers byte for byte: the spreadsheet value is whole and equal, not merely close."""
    assert value is not None and float(value).is_integer(), value
    assert int(value) == expected


def _check_ledger(case: Case) -> None:
    wb = load_workbook(case.computed, data_only=True)
    plan = case.expected
    for key, name in LINE_NAMES.items():
        _exact(cell_of(wb, name).value, plan.line(key))
    for key, name in CACHE_NAMES.items():  # a line only where the model has that cache
        assert (cell_of(wb, name) is None) is (key not in {line.key for line in plan.lines})
        if cell_of(wb, name) is not None:
            _exact(cell_of(wb, name).value, plan.line(key))
    assert [wb["Ledger"].cell(row=r, column=1).value for r in range(2, 2 + len(plan.lines))] \
        == [line.key for line in plan.lines]
    for name, expected in (("state_bytes_per_request", plan.state_bytes_per_request),
                           ("indexer_bytes_per_token", plan.indexer_bytes_per_token),
                           ("cache_bytes_per_request", cache_bytes_per_request(plan)),
                           ("committed_bytes", plan.committed_bytes),
                           ("free_bytes", plan.free_bytes),
                           ("kv_bytes_per_token", plan.kv_bytes_per_token),
                           ("kv_bytes_per_request", plan.kv_bytes_per_request),
                           ("memory_ceiling_requests", plan.memory_ceiling_requests),
                           ("context_tokens", plan.serve.context_tokens),
                           ("requests", plan.serve.concurrency)):
        _exact(cell_of(wb, name).value, expected)
    assert cell_of(wb, "fits").value is plan.fits


@pytest.mark.parametrize("name", BUNDLED + VARIANTS)
def test_every_ledger_line_recalculates_byte_for_byte(recalculated, name) -> None:
    _check_ledger(recalculated[name])


@pytest.mark.parametrize("name", EDITED)
def test_an_edited_input_recomputes_as_build_plan_would(recalculated, name) -> None:
    case = recalculated[name]
    assert case.expected.memory_ceiling_requests != case.src.plan().memory_ceiling_requests
    _check_ledger(case)


@pytest.mark.parametrize("name", RANDOM_EDITS + HYBRID_RANDOM_EDITS)
def test_random_what_ifs_recompute_as_build_plan_would(recalculated, name) -> None:
    _check_ledger(recalculated[name])


def test_the_new_families_are_recalculated(recalculated) -> None:
    """Every bundled hybrid (a state, chunked-local layers, an indexer, per-layer shapes) and
    the configs once refused (kimi_k2, MiniMax) is among the workbooks checked above."""
    assert set(HYBRIDS) <= set(BUNDLED) <= set(recalculated)
    specs = {name: recalculated[name].src.spec for name in HYBRIDS}
    assert {n for n, s in specs.items() if s.state_layers} == {"qwen3.6-35b-a3b",
                                                                "nemotron-3-nano-30b-a3b"}
    assert specs["deepseek-v3.2"].attention.indexer_head_dim
    assert "chunked" in specs["llama-4-scout-17b-16e-instruct"].attention.layer_kinds
    assert specs["gemma-4-26b-a4b"].attention.full_head_dim == 512


@pytest.mark.parametrize("name", sorted(CLASS_DEFAULTS))
def test_mamba2_families_recalculate_from_transformers_defaults(recalculated, name) -> None:
    """Falcon-H1 (attention and Mamba-2 in every layer) and Granite-4, from transformers'
    config-class defaults."""
    pytest.importorskip("transformers")
    case = recalculated[name]
    assert case.expected.state_bytes_per_request > 0
    _check_ledger(case)


def test_a_hybrid_state_does_not_grow_with_context_but_its_ceiling_falls(recalculated):
    """Edited context: the state per request stays, the KV grows, the ceiling moves."""
    case = recalculated["edit-qwen36-load"]
    before = load_workbook(recalculated["qwen3.6-35b-a3b"].computed, data_only=True)
    after = load_workbook(case.computed, data_only=True)
    assert cell_of(after, "state_bytes_per_request").value \
        == cell_of(before, "state_bytes_per_request").value > 0
    assert cell_of(after, "kv_bytes_per_request").value > cell_of(
        before, "kv_bytes_per_request").value
    assert cell_of(after, "state_cache_bytes").value == 3 * cell_of(
        after, "state_bytes_per_request").value


def test_weights_read_from_safetensors_headers_are_declared_in_the_workbook(recalculated):
    case = recalculated["model-dir"]
    wb = load_workbook(case.original)
    assert cell_of(wb, "declared_weights_bytes").value == 2_471_000_003
    assert cell_of(wb, "weight_metadata_bytes").value == 8192
    assert case.expected.line("weights") == 2_471_000_003


def test_every_bundled_model_has_a_real_ceiling(recalculated) -> None:
    assert all(recalculated[m].expected.memory_ceiling_requests > 0 for m in BUNDLED)


def test_ledger_lines_are_formulas_not_pasted_numbers(recalculated) -> None:
    wb = load_workbook(recalculated["llama-3.1-8b"].original)
    for name in [*LINE_NAMES.values(), "committed_bytes", "memory_ceiling_requests",
                 "kv_bytes_per_token", "kv_bytes_per_request"]:
        assert str(cell_of(wb, name).value).startswith("="), name
    assert "INT(" in cell_of(wb, "memory_ceiling_requests").value


@pytest.mark.parametrize("name", ["envelope", "envelope-hybrid"])
def test_envelope_matches_build_plan_per_context_device_and_kv_dtype(recalculated, name):
    case = recalculated[name]
    rows = list(load_workbook(case.computed, data_only=True)["Envelope"].iter_rows(
        min_row=2, max_col=8, values_only=True))
    sweep = case.sweep
    assert len(rows) == len(sweep.devices) * len(sweep.contexts_tokens) * len(sweep.kv_dtypes)
    for kv_dtype, _bits, context, _label, device, safety, per_request, ceiling in rows:
        serve = replace(with_device(case.src.serve, device), context_tokens=context,
                        kv_dtype=kv_dtype, lengths=())
        plan = build_plan(case.src.spec, serve, case.src.overrides)
        _exact(safety, plan.line("safety"))
        _exact(per_request, plan.kv_bytes_per_request)
        _exact(ceiling, plan.memory_ceiling_requests)
    assert len({r[7] for r in rows}) > 4, "the sweep should move the ceiling"


@pytest.mark.parametrize("name", ["llama-lengths-prefix", "gptoss-lengths-window",
                                  "llama-3.1-8b"])
def test_paging_sheet_matches_paging_report(recalculated, name) -> None:
    case = recalculated[name]
    serve = case.expected.serve
    rows = list(load_workbook(case.computed, data_only=True)["Paging"].iter_rows(
        min_row=2, max_row=1 + len(block_sizes(serve.block_size_tokens)), values_only=True))
    for size, logical, entries, shared, physical, slots, stored, unused, fill in rows:
        report = paging_report(list(serve.live_lengths), size, serve.shared_prefix_tokens)
        assert (logical, entries, shared, physical, slots, stored, unused) == (
            report.logical_tokens, report.block_table_entries, report.shared_blocks,
            report.num_blocks, report.slot_tokens, report.stored_tokens,
            report.unused_slot_tokens)
        assert stored + unused == slots and 0 < fill <= 1


def test_a_hybrid_quantization_row_divides_by_kv_and_state(recalculated) -> None:
    case = recalculated["nemotron-int8kv"]
    kv = list(load_workbook(case.computed, data_only=True)["Quantization"].iter_rows(
        min_row=4, max_row=4, values_only=True))[0]
    bf16_kv = build_plan(case.src.spec, replace(case.src.serve, kv_dtype="bf16"),
                         case.src.overrides)
    assert kv[:3] == ("KV cache", "int8", 8)
    _exact(kv[7], bf16_kv.memory_ceiling_requests)
    _exact(kv[6], case.expected.memory_ceiling_requests)


def test_quantization_rows_give_the_bf16_ceilings(recalculated) -> None:
    case = recalculated["llama-int4-fp8kv"]
    rows = list(load_workbook(case.computed, data_only=True)["Quantization"].iter_rows(
        min_row=2, max_row=4, values_only=True))
    weights, activations, kv = rows
    assert [r[0] for r in rows] == ["weights", "activations", "KV cache"]
    assert (weights[1], weights[2], activations[2], kv[1], kv[2]) == ("int4", 4, 16, "fp8", 8)
    bf16_kv = build_plan(case.src.spec, replace(case.src.serve, kv_dtype="bf16"),
                         case.src.overrides)
    _exact(kv[7], bf16_kv.memory_ceiling_requests)
    _exact(kv[6], case.expected.memory_ceiling_requests)
    assert kv[8] == kv[6] - kv[7] and kv[8] > 0
    assert weights[5] > 0 and weights[8] >= 0
    assert all(r[9] for r in rows), "each row says what to measure before trusting it"


def test_the_quantization_sheet_sums_each_checkpoint_format_to_the_weights_line(
        recalculated) -> None:
    """One row per storage format (fp8, nvfp4 w4a16, bf16): LibreOffice's totals are the
    plan's weights and metadata lines, byte for byte."""
    case = recalculated["qwen36-27b-mixed-formats"]
    wb = load_workbook(case.computed, data_only=True)
    rows = [r for r in wb["Quantization"].iter_rows(min_row=9, values_only=True) if r[0]]
    assert [r[0] for r in rows] == ["nvfp4 (w4a16)", "fp8", "bf16", "all formats"]
    _exact(rows[-1][3], case.expected.line("weights"))
    _exact(rows[-1][4], case.expected.line("weight_metadata"))
    _exact(cell_of(wb, "format_weights_bytes").value, case.expected.line("weights"))
    assert sum(r[3] for r in rows[:-1]) - rows[-1][3] in range(0, 3)  # each row rounds up


def _pytest_without_soffice(tmp_path, ci: str) -> subprocess.CompletedProcess:
    """Run one recalculation test with LibreOffice off the PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": str(bindir), "CI": ci}
    test = f"{Path(__file__)}::test_every_bundled_model_has_a_real_ceiling"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           test], capture_output=True, text=True, env=env, timeout=120)


def test_missing_libreoffice_fails_under_ci_and_skips_locally(tmp_path) -> None:
    under_ci = _pytest_without_soffice(tmp_path, "true")
    assert under_ci.returncode != 0 and "required under CI=true" in under_ci.stdout
    local = _pytest_without_soffice(tmp_path, "")
    assert local.returncode == 0 and "1 skipped" in local.stdout


def test_from_workbook_replans_a_file_libreoffice_saved(recalculated) -> None:
    """A reviewer opens, edits and saves in a spreadsheet; --from-workbook must still read it."""
    runner = CliRunner()
    for name, case in recalculated.items():
        result = runner.invoke(app, ["plan", "--from-workbook", str(case.computed), "--json"])
        assert result.exit_code in (0, 1), (name, result.output)
        expected = plan_to_dict(case.expected)
        out = json.loads(result.stdout)  # the deployment's JSON: the plan's keys and more
        assert {key: out[key] for key in expected} == expected, name


def test_cached_values_equal_what_libreoffice_computes(recalculated) -> None:
    """Unedited workbooks: every value servecap cached is the one LibreOffice recalculates."""
    for name, case in recalculated.items():
        if name.startswith(("edit-", "random-")):
            continue
        count, wrong = cached_mismatches(case.original, case.computed)
        assert count >= 25 and not wrong, (name, wrong[:5])
    frame = pandas.read_excel(recalculated["llama-3.1-8b"].original, sheet_name="Ledger")
    assert frame["bytes / value"][0] == recalculated["llama-3.1-8b"].expected.line("weights")
