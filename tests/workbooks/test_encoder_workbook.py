"""The encoder cache in a workbook: live Ledger formulas over vLLM's scheduler Inputs and the
item's tokens, which LibreOffice recalculates to plan --json's encoder_cache_bytes; an edited
limit moves it as build_plan does, and --from-workbook replays the multimodal flags."""

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import Case, _edited, recalc
from openpyxl import load_workbook
from test_recalc import _check_ledger

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags
from servecap.cli.plan_json import plan_to_dict
from servecap.cli.workbook_cmd import workbook_source
from servecap.ledger.plan import build_plan
from servecap.workbooks.export import build_workbook, save_workbook
from servecap.workbooks.names import cell_of
from servecap.workbooks.readback import read_plan_inputs

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
QWEN3VL = str(CONFIGS / "Qwen--Qwen3-VL-8B-Instruct" / "config.json")
GEMMA3 = str(CONFIGS / "google--gemma-3-27b-it" / "config.json")
INTERNVL = str(CONFIGS / "OpenGVLab--InternVL3-1B" / "config.json")
CASES = {
    "qwen3vl": (QWEN3VL, PlanFlags(device="h100-80gb", context=32768, concurrency=2,
                                   limit_mm_per_prompt='{"image": 3, "video": 0}',
                                   mm_processor_kwargs='{"max_pixels": 1003520}')),
    "gemma3-pan": (GEMMA3, PlanFlags(device="h200-141gb", context=8192, concurrency=4,
                                     limit_mm_per_prompt="image=4",
                                     mm_processor_kwargs='{"do_pan_and_scan": true}'),
                   DeployFlags(engine="vllm")),
    # 13 tiles x 256 tokens an image (max_dynamic_patch 12 and the thumbnail)
    "internvl": (INTERNVL, PlanFlags(device="h100-80gb", context=16384, concurrency=4,
                                     limit_mm_per_prompt='{"image": 2, "video": 0}')),
}


@pytest.fixture(scope="module")
def books(soffice_bin, tmp_path_factory) -> dict[str, Case]:
    folder = tmp_path_factory.mktemp("encoder-books")
    built, paths = {}, {}
    for name, (model, flags, *deploy) in CASES.items():
        src = workbook_source(model, flags, *deploy)
        built[name] = (src, src.plan())
        paths[name] = save_workbook(build_workbook(src), folder / f"{name}.xlsx")
    # one image a prompt on 2 sequences; the runtime peak stays the value the cell carries
    src, plan = built["qwen3vl"]
    paths["edit-qwen3vl"] = _edited(paths["qwen3vl"], {"encoder_limit_per_prompt": 1,
                                                       "max_num_seqs": 2},
                                    folder / "edit-qwen3vl.xlsx")
    enc = replace(src.serve.encoder, limits=(("image", 1), ("video", 0)))
    serve = replace(src.serve, encoder=enc, max_num_seqs=2,
                    runtime_peak_bytes=plan.line("runtime_peak"))
    built["edit-qwen3vl"] = (src, build_plan(src.spec, serve, src.overrides))
    computed = recalc(soffice_bin, list(paths.values()), folder / "recalculated")
    return {name: Case(src, plan, paths[name], computed[name])
            for name, (src, plan) in built.items()}


@pytest.mark.parametrize("name", ["qwen3vl", "edit-qwen3vl", "gemma3-pan", "internvl"])
def test_the_encoder_lines_recalculate_to_plans_bytes(books, name):
    found = books[name]
    wb = load_workbook(found.computed, data_only=True)
    expected = plan_to_dict(found.expected)
    assert expected["encoder_cache_bytes"] > 0
    if cell_of(wb, "encoder_cache_line_bytes") is not None:  # one device's Ledger sheet
        assert cell_of(wb, "encoder_cache_line_bytes").value == expected["encoder_cache_bytes"]
        assert cell_of(wb, "encoder_profile_line_bytes").value \
            == expected["encoder_profile_bytes"]
        _check_ledger(found)
    else:  # an engine's Ranks sheet carries the lines and takes them out of vLLM's pool
        assert cell_of(wb, "memory_ceiling_requests").value \
            == found.expected.memory_ceiling_requests


def test_the_line_is_a_formula_over_the_knobs(books):
    formula = cell_of(load_workbook(books["qwen3vl"].original), "encoder_cache_line_bytes").value
    assert formula.startswith("=") and all(
        knob in formula for knob in ("max_num_batched_tokens", "max_num_seqs",
                                     "encoder_limit_per_prompt", "encoder_tokens_per_item"))
    # images of 980 tokens (1003520 / 32^2), 4,096 x (1 + 3 deepstack) wide, bf16: the
    # budget (8,192 // 980 = 8) binds; edited, 2 sequences x 1 image a prompt do
    width = 4096 * 4 * 2
    assert books["qwen3vl"].expected.line("encoder_cache") == 8 * 980 * width
    assert books["edit-qwen3vl"].expected.line("encoder_cache") == 2 * 980 * width


def test_from_workbook_replays_the_multimodal_flags(books):
    flags = read_plan_inputs(books["edit-qwen3vl"].original).flags
    assert flags["limit_mm_per_prompt"] == '{"image": 1, "video": 0}'
    assert flags["mm_processor_kwargs"] == '{"max_pixels": 1003520}'
