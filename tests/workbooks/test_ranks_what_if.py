"""What-ifs typed into a deployment workbook's cells (gpu_memory_utilization, the tensor-parallel
size, vLLM's Mamba cache mode, the context and KV dtype): LibreOffice recalculates them as
the same flags plan, and --from-workbook replans them."""

import math
from pathlib import Path

import pytest
from conftest import recalc
from openpyxl import load_workbook
from ranks_books import VARIANTS, plan_json, sheet_rows

from servecap.workbooks.names import cell_of


@pytest.fixture(scope="module")
def start_what_ifs(engine_books, soffice_bin, tmp_path_factory) -> dict[str, Path]:
    """gpu_memory_utilization typed in the cell: 0.99 -> 0.9 on a hybrid that did not start,
    0.92 -> 0.99 on a windowed model that did (one LibreOffice run)."""
    folder = tmp_path_factory.mktemp("start-what-ifs")
    edits = {"qwen36-tp4-vllm-after-pool": 0.9, "gemma-tp2-vllm-window": 0.99}
    for name, value in edits.items():
        wb = load_workbook(engine_books[name][2])
        cell_of(wb, "gpu_memory_utilization").value = value
        wb.save(folder / f"{name}.xlsx")
    return recalc(soffice_bin, [folder / f"{name}.xlsx" for name in edits],
                  folder / "recalculated")


@pytest.mark.parametrize("name,util,starts", [("qwen36-tp4-vllm-after-pool", "0.9", True),
                                              ("gemma-tp2-vllm-window", "0.99", False)])
def test_an_edited_utilization_moves_the_start_verdict(engine_books, start_what_ifs, name, util,
                                                       starts) -> None:
    args = list(VARIANTS[name])
    if "--gpu-memory-utilization" in args:
        at = args.index("--gpu-memory-utilization")
        del args[at:at + 2]
    code, flagged = plan_json([*args, "--gpu-memory-utilization", util])
    assert flagged["starts"] is starts and code == (0 if starts else 1)
    wb = load_workbook(start_what_ifs[name], data_only=True)
    assert cell_of(wb, "deployment_starts").value is starts
    assert cell_of(wb, "deployment_fits").value is flagged["fits"]
    ws, rows = wb["Ranks"], sheet_rows(wb["Ranks"])
    for i, rank in enumerate(flagged["ranks"]):
        assert ws.cell(row=rows["fits"], column=3 + i).value is rank["fits"], (name, i)
        assert ws.cell(row=rows["num_gpu_blocks"], column=3 + i).value == rank["num_gpu_blocks"]
    assert plan_json(["--from-workbook", str(start_what_ifs[name])]) == (code, flagged)


@pytest.fixture(scope="module")
def what_ifs(engine_books, soffice_bin, tmp_path_factory) -> dict[str, Path]:
    """The Nemotron-3-Nano tp 2 vLLM workbook with tp 4, and with vLLM's other Mamba cache
    modes, typed in its cells (one LibreOffice run)."""
    folder = tmp_path_factory.mktemp("what-ifs")
    edits = {"tp4": ("tensor_parallel_size", 4), "all": ("mamba_cache_mode", "all"),
             "none": ("mamba_cache_mode", "none")}
    paths = []
    for name, (cell, value) in edits.items():
        wb = load_workbook(engine_books["nemotron-3-nano-30b-a3b-tp2-vllm"][2])
        cell_of(wb, cell).value = value
        wb.save(folder / f"{name}.xlsx")
        paths.append(folder / f"{name}.xlsx")
    return recalc(soffice_bin, paths, folder / "recalculated")


NEMOTRON_TP2 = ["nemotron-3-nano-30b-a3b", "--device", "2TiB", "--context", "4096",
                "--concurrency", "4", "-tp", "2", "--engine", "vllm"]


def test_an_edited_tensor_parallel_size_reshapes_a_hybrid_rank(what_ifs) -> None:
    """tp 2 -> 4 in the cell: each rank's KV heads, state and page follow the shapes tp 4 has
    (the per-rank weights are the plan's values: --from-workbook replans the rest)."""
    ws = load_workbook(what_ifs["tp4"], data_only=True)["Ranks"]
    tp = NEMOTRON_TP2.index("-tp")
    _, tp4 = plan_json([*NEMOTRON_TP2[:tp], "-tp", "4", *NEMOTRON_TP2[tp + 2:]])
    rows, lines = sheet_rows(ws), {line["key"]: line["bytes"] for line in tp4["ranks"][0]["lines"]}
    assert ws.cell(row=rows["state_cache"], column=3).value == lines["state_cache"]
    assert ws.cell(row=rows["kv_cache"], column=3).value == lines["kv_cache"]
    assert ws.cell(row=rows["page_bytes"], column=3).value * ws.cell(
        row=rows["group_layers"], column=3).value == tp4["block_bytes"]
    assert ws.cell(row=rows["blocks_per_request"], column=3).value == tp4["blocks_per_request"]


@pytest.mark.parametrize("mode", ["all", "none"])
def test_vllm_mamba_cache_modes_recalculate_as_the_ledger_lays_them_out(what_ifs, mode):
    """'all' raises the block in steps of lcm(256, 16) (vLLM to 0.31; from 0.32 as 'align')
    and keeps a state per block; 'none' one state page a request (ledger.hybrid.layout, built
    here with the mode the cell names)."""
    from dataclasses import replace

    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags
    from servecap.cli.workbook_cmd import workbook_source
    from servecap.ledger.ranks import build_deployment

    src = workbook_source(NEMOTRON_TP2[0], PlanFlags(device="2TiB", context=4096, concurrency=4),
                          DeployFlags(tensor_parallel_size=2, engine="vllm"))
    dep = build_deployment(src.spec, replace(src.serve, mamba_cache_mode=mode), src.overrides,
                           src.deployment.parallel, src.engine)
    ws = load_workbook(what_ifs[mode], data_only=True)["Ranks"]
    rows, budget = sheet_rows(ws), dep.plan.budget
    for key, expected in (("attention_block_size", budget.block_size_tokens),
                          ("num_gpu_blocks", budget.num_gpu_blocks),
                          ("blocks_per_request", budget.blocks_per_request),
                          ("block_bytes", budget.block_bytes),
                          ("kv_cache_tokens", budget.kv_cache_tokens)):
        assert ws.cell(row=rows[key], column=3).value == expected, (mode, key)
    assert math.isclose(ws.cell(row=rows["max_concurrency"], column=3).value,
                        budget.max_concurrency, rel_tol=1e-14)
    chunked = mode == "all" and src.engine.vllm_row.mamba_all_chunk_aligned
    assert (budget.block_size_tokens % 256 == 0) is chunked


def test_an_edited_hybrid_workbook_replans_like_the_flags(engine_books, tmp_path) -> None:
    wb = load_workbook(engine_books["qwen36-tp4-vllm-long"][2])
    cell_of(wb, "context_tokens").value = 65536
    cell_of(wb, "kv_dtype").value = "fp8"
    cell_of(wb, "gpu_memory_utilization").value = 0.85
    wb.save(tmp_path / "edited.xlsx")
    _, edited = plan_json(["--from-workbook", str(tmp_path / "edited.xlsx")])
    args = VARIANTS["qwen36-tp4-vllm-long"]
    args = args[:args.index("--context")] + ["--context", "65536", "--concurrency", "2"]
    _, flagged = plan_json([*args, "--kv-dtype", "fp8", "--gpu-memory-utilization", "0.85"])
    assert edited == flagged and edited["state_bytes_per_request"] > 0


