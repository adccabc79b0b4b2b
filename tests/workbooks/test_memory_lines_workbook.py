"""The LoRA slots and the EPLB line in a workbook: live formulas over vLLM's knobs that
LibreOffice recalculates to plan --json's bytes, and edited knobs that move the ceiling as
build_plan does."""

import pytest
from openpyxl import load_workbook
from test_recalc import _check_ledger

from servecap.cli.plan_json import plan_to_dict
from servecap.workbooks.names import cell_of

CASES = [("llama-lora", "lora_line_bytes", "lora_bytes"),
         ("phi3-lora-targets", "lora_line_bytes", "lora_bytes"),
         ("edit-llama-lora", "lora_line_bytes", "lora_bytes"),
         ("qwen3moe-eplb", "eplb_line_bytes", "eplb_bytes"),
         ("edit-qwen3moe-eplb", "eplb_line_bytes", "eplb_bytes")]


@pytest.mark.parametrize(("case", "name", "key"), CASES)
def test_each_line_recalculates_to_plans_bytes(recalculated, case, name, key):
    found = recalculated[case]
    wb = load_workbook(found.computed, data_only=True)
    expected = plan_to_dict(found.expected)[key]
    assert expected > 0 and cell_of(wb, name).value == expected
    _check_ledger(found)


@pytest.mark.parametrize(("case", "name", "knobs"), [
    ("llama-lora", "lora_line_bytes", ("max_loras", "max_lora_rank")),
    ("qwen3moe-eplb", "eplb_line_bytes", ("num_redundant_experts", "eplb_window_size"))])
def test_the_lines_are_formulas_over_the_knobs(recalculated, case, name, knobs):
    formula = cell_of(load_workbook(recalculated[case].original), name).value
    assert formula.startswith("=") and all(knob in formula for knob in knobs)


def test_edited_knobs_lower_the_ceiling(recalculated):
    for before, after in (("llama-lora", "edit-llama-lora"),
                          ("qwen3moe-eplb", "edit-qwen3moe-eplb")):
        assert recalculated[after].expected.memory_ceiling_requests \
            < recalculated[before].expected.memory_ceiling_requests
