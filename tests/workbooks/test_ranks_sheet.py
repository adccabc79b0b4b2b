"""Multi-GPU and engine plans: the Ranks sheet recalculates in LibreOffice to plan --json, rank
by rank, and --from-workbook replans the file (also after LibreOffice saved it)."""

import json
import math
from pathlib import Path

import pandas
import pytest
from conftest import BUNDLED, cached_mismatches, recalc
from openpyxl import load_workbook
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.errors import SpecError
from servecap.ledger.vllm_log import parse_vllm_log
from servecap.workbooks.names import cell_of

RUNNER = CliRunner()
VARIANTS = {
    "70b-tp4-vllm": ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4",
                     "--engine", "vllm"],
    "70b-tp2-pp2-vllm": ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "2",
                         "-pp", "2", "--engine", "vllm", "--context", "32768"],
    "8b-pp3-plain": ["llama-3.1-8b", "--device", "40GiB", "-pp", "3"],
    "8b-tp2-plain-lengths": ["llama-3.1-8b", "--device", "24GiB", "-tp", "2", "--lengths",
                             "17,33,65,65", "--shared-prefix", "16"],
    "gemma-tp2-sglang": ["gemma-2-9b-it", "--device", "h100-80gb", "-tp", "2", "--engine",
                         "sglang", "--lengths", "100,5000,5000", "--shared-prefix", "64"],
    "gemma-tp2-vllm-window": ["gemma-2-9b-it", "--device", "h100-80gb", "-tp", "2", "--engine",
                              "vllm", "--lengths", "100,4111,5000", "--block-size", "16"],
    "gemma-pp2-sglang-knob": ["gemma-2-9b-it", "--device", "h100-80gb", "-pp", "2",
                              "--engine", "sglang", "--mem-fraction-static", "0.8"],
    "qwen-pp2-dp2-trtllm": ["qwen3-30b-a3b", "--device", "h100-80gb", "-pp", "2", "-dp", "2",
                            "--engine", "trtllm", "--free-gpu-memory-fraction", "0.8"],
    "gptoss-tp2-vllm-measured": ["gpt-oss-20b", "--device", "h100-80gb", "-tp", "2",
                                 "--engine", "vllm", "--kv-cache-memory", "20G", "--non-torch",
                                 "0.4GiB", "--cuda-graph-memory", "1GiB", "--comm-buffer",
                                 "2GiB"],
    "deepseek-tp8-vllm": ["deepseek-v3", "--device", "2TiB", "-tp", "8", "--engine", "vllm",
                          "--gpu-memory-utilization", "0.85", "--kv-dtype", "fp8"],
    "deepseek-tp8-vllm-0.6.5": ["deepseek-v3", "--device", "h200-141gb", "-tp", "8", "--engine",
                                "vllm==0.6.5", "--context", "8192"],  # per-head K and V
    "8b-vllm-weights": ["llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm",
                        "--weights", "14.99GiB", "--concurrency", "300", "--context", "8192"],
    # hybrids: vLLM's page arithmetic (docs/hybrid.md), every engine, pipeline stages, lengths
    "qwen36-tp4-vllm-long": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "4",
                             "--engine", "vllm", "--context", "131072", "--concurrency", "2"],
    "qwen36-pp2-vllm-fp8": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-pp", "2",
                            "--engine", "vllm", "--context", "32768", "--kv-dtype", "fp8"],
    "nemotron-tp4-pp2-lengths": ["nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "-tp",
                                 "4", "-pp", "2", "--engine", "vllm", "--lengths",
                                 "100,5000,8192"],
    "nemotron-tp2-plain": ["nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "-tp", "2",
                           "--context", "8192", "--concurrency", "9"],
    "qwen36-tp2-sglang": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "2", "--engine",
                          "sglang", "--context", "8192", "--concurrency", "9"],
    "deepseek32-tp8-trtllm": ["deepseek-v3.2", "--device", "2TiB", "-tp", "8", "--engine",
                              "trtllm", "--context", "8192", "--concurrency", "9"],
    "deepseek32-pp2-vllm": ["deepseek-v3.2", "--device", "2TiB", "-pp", "2", "--engine", "vllm",
                            "--context", "16384", "--kv-dtype", "fp8", "--block-size", "64"],
    "llama4-tp2-pp2-lengths": ["llama-4-scout-17b-16e-instruct", "--device", "h100-80gb", "-tp",
                               "2", "-pp", "2", "--engine", "vllm", "--lengths",
                               "100,9000,100000", "--shared-prefix", "64"],
    "gemma4-tp8-vllm": ["gemma-4-26b-a4b", "--device", "h100-80gb", "-tp", "8", "--engine",
                        "vllm", "--context", "8192"],
    # the official config: the vision tower vLLM loads (SigLIP's linear layers split over tp)
    "gemma3-27b-tp2-vllm-tower": [str(Path(__file__).resolve().parents[1] / "fixtures" / "configs"
                                      / "google--gemma-3-27b-it"), "--device", "h100-80gb",
                                  "-tp", "2", "--engine", "vllm==0.19.0", "--context", "8192"],
    "gemma4-tp4-vllm-fp8": ["gemma-4-26b-a4b", "--device", "h100-80gb", "-tp", "4", "--engine",
                            "vllm", "--kv-dtype", "fp8", "--context", "20000"],
    "qwen36-vllm-0.10": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "2", "--engine",
                         "vllm==0.10", "--context", "8192"],
    # per-layer shapes (issue 37): KV-sharing layers and per-kind K/V sizes on the other engines
    "gemma4-e2b-tp2-sglang": ["gemma-4-e2b-it", "--device", "h100-80gb", "-tp", "2", "--engine",
                              "sglang", "--context", "8192", "--concurrency", "9"],
    "mimo-v2-tp8-trtllm": ["mimo-v2-flash", "--device", "2TiB", "-tp", "8", "--engine",
                           "trtllm", "--context", "8192", "--concurrency", "9"],
    # pools that hold a request, but the graphs and the sampler warm-up find no room after them
    "8b-vllm-after-pool": ["llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm==0.19",
                           "--context", "8192", "--gpu-memory-utilization", "0.99"],
    "qwen36-tp4-vllm-after-pool": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "4",
                                   "--engine", "vllm", "--context", "131072", "--concurrency",
                                   "2", "--gpu-memory-utilization", "0.99"],
    "gemma-tp2-vllm-window-after-pool": ["gemma-2-9b-it", "--device", "h100-80gb", "-tp", "2",
                                         "--engine", "vllm", "--lengths", "100,4111,5000",
                                         "--gpu-memory-utilization", "0.99"],
}
AFTER_POOL = tuple(name for name in VARIANTS if name.endswith("after-pool"))
# A real vLLM startup log of a gated-DeltaNet hybrid (issue 652 of noonghunna/club-3090, vLLM
# 0.24.0, tests/fixtures/vllm_logs): its KV pool, max_model_len and flags as planned flags.
LOG = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs" / \
    "v1_qwen36_35b_a3b_nvfp4_5090_club652.log"
# Each ranks entry of plan --json -> the Ranks sheet row (its key in column A).
ROWS = {"weights_bytes": "weights", "weight_metadata_bytes": "weight_metadata",
        "runtime_peak_bytes": "runtime_peak", "safety_bytes": "safety",
        "kv_bytes_per_token": "kv_bytes_per_token", "kv_bytes_per_request": "kv_bytes_per_request",
        "kv_bytes_total": "kv_cache", "committed_bytes": "committed", "free_bytes": "free",
        "memory_ceiling_requests": "ceiling", "fits": "fits", "kv_pool_bytes": "kv_pool_bytes",
        "num_gpu_blocks": "num_gpu_blocks", "kv_cache_tokens": "kv_cache_tokens",
        "block_bytes": "block_bytes", "blocks_per_request": "blocks_per_request",
        "binding": "binding", "max_concurrency": "max_concurrency"}
TOTALS = ("binding_rank", "total_ceiling_requests", "weights_bytes_all_devices")


def _plan(args: list[str]) -> tuple[int, dict]:
    result = RUNNER.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def _engine_cases() -> dict[str, list[str]]:
    """Every bundled model under vLLM on two GPUs where tp=2 is allowed, plus the variants."""
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags
    from servecap.cli.plan_cmd import deployment_from_flags

    cases = dict(VARIANTS)
    facts = parse_vllm_log(LOG.read_text())
    cases["qwen36-5090-log"] = ["qwen3.6-35b-a3b", "--device", "32GiB", "--engine", "vllm",
                                "--kv-dtype", "fp8", "--context", str(facts.max_model_len),
                                "--max-num-batched-tokens", "8192", "--kv-cache-memory",
                                str(facts.gib_bytes("kv_pool_gib"))]
    for model in BUNDLED:
        try:
            deployment_from_flags(model, PlanFlags(device="2TiB", context=4096),
                                  DeployFlags(tensor_parallel_size=2, engine="vllm"))
        except SpecError:
            continue
        cases[f"{model}-tp2-vllm"] = [model, "--device", "2TiB", "--context", "4096",
                                      "--concurrency", "4", "-tp", "2", "--engine", "vllm"]
    return cases


@pytest.fixture(scope="module")
def books(soffice_bin, tmp_path_factory) -> dict[str, tuple[int, dict, Path, Path]]:
    folder = tmp_path_factory.mktemp("ranks")
    written = {}
    for name, args in _engine_cases().items():
        path = folder / f"{name}.xlsx"
        code, out = _plan([*args, "--xlsx", str(path)])
        written[name] = (code, out, path)
    computed = recalc(soffice_bin, [w[2] for w in written.values()], folder / "recalculated")
    return {name: (code, out, path, computed[name]) for name, (code, out, path)
            in written.items()}


def _rows(ws) -> dict[str, int]:
    return {ws.cell(row=r, column=1).value: r for r in range(1, ws.max_row + 1)}


def test_many_models_and_engines_are_covered(books) -> None:
    assert len(books) >= len(VARIANTS) + 8
    assert {out["engine"] for _, out, _, _ in books.values()} == {"plain", "vllm", "sglang",
                                                                  "trtllm"}


def test_every_rank_recalculates_to_plan_json(books) -> None:
    """Integers byte for byte; max concurrency to the 15 significant digits xlsx stores."""
    for name, (_, out, _, computed) in books.items():
        wb = load_workbook(computed, data_only=True)
        ws, rows = wb["Ranks"], _rows(wb["Ranks"])
        assert ws.max_column - 2 == len(out["ranks"]), name
        for i, rank in enumerate(out["ranks"]):
            lines = {line["key"]: line["bytes"] for line in rank["lines"]}
            assert ("encoder_weights" in lines) is (name == "gemma3-27b-tp2-vllm-tower"), name
            if "encoder_weights" in lines:  # the tower's line, from its fixed row
                assert ws.cell(row=rows["encoder_weights"], column=3 + i).value == \
                    lines["encoder_weights"], (name, "encoder_weights")
            for key in ("indexer_cache", "state_cache"):  # a row where the model has the cache
                assert (key in rows) is (key in lines), (name, key)
                if key in lines:
                    assert ws.cell(row=rows[key], column=3 + i).value == lines[key], (name, key)
            for key, row in ROWS.items():
                if key not in rank:
                    continue
                got = ws.cell(row=rows[row], column=3 + i).value
                if key == "max_concurrency":
                    assert math.isclose(got, rank[key], rel_tol=1e-14), (name, i, key)
                else:
                    assert got == rank[key] and type(got) is type(rank[key]) or \
                        (isinstance(got, int | float) and float(got).is_integer()
                         and int(got) == rank[key]), (name, i, key, got, rank[key])
        for key in TOTALS:
            assert cell_of(wb, key).value == out[key], (name, key)
        assert cell_of(wb, "deployment_fits").value is out["fits"], name


def test_the_real_hybrid_log_recalculates_to_what_vllm_printed(books) -> None:
    """300 blocks, 4.35x, 569,878 tokens (docs/hybrid.md derives them by hand): the page
    arithmetic as LibreOffice computes it from the workbook's cells."""
    facts = parse_vllm_log(LOG.read_text())
    _, _, path, computed = books["qwen36-5090-log"]
    ws = load_workbook(computed, data_only=True)["Ranks"]
    rows = _rows(ws)
    assert ws.cell(row=rows["attention_block_size"], column=3).value == 2096
    assert ws.cell(row=rows["page_bytes"], column=3).value == 2_146_304
    pool = facts.gib_bytes("kv_pool_gib")  # the log prints the pool and concurrency, not blocks
    assert ws.cell(row=rows["num_gpu_blocks"], column=3).value == pool // 2_146_304 // 10 == 300
    assert f"{ws.cell(row=rows['max_concurrency'], column=3).value:.2f}" \
        == f"{facts.max_concurrency:.2f}"
    assert ws.cell(row=rows["kv_cache_tokens"], column=3).value == facts.kv_cache_tokens
    formula = load_workbook(path)["Ranks"].cell(row=rows["attention_block_size"], column=3).value
    assert "mamba_cache_mode" in formula and "LCM(" in formula


def test_a_hybrid_block_size_and_page_recalculate_to_the_deployment(books) -> None:
    """The attention block raised to hold a state, the page every group shares, per rank."""
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags
    from servecap.cli.plan_cmd import deployment_from_flags

    count = 0
    for name, (_, out, _, computed) in books.items():
        ws = load_workbook(computed, data_only=True)["Ranks"]
        rows = _rows(ws)
        if "attention_block_size" not in rows:
            continue
        count += 1
        for i, rank in enumerate(out["ranks"]):
            block = ws.cell(row=rows["attention_block_size"], column=3 + i).value
            blocks = ws.cell(row=rows["num_gpu_blocks"], column=3 + i).value
            assert blocks == rank["num_gpu_blocks"], name
            assert rank["block_bytes"] == ws.cell(row=rows["page_bytes"], column=3 + i).value \
                * ws.cell(row=rows["group_layers"], column=3 + i).value, name
            assert block % 16 == 0 or "deepseek" in name, (name, block)
    assert count >= 10
    dep = deployment_from_flags("qwen3.6-35b-a3b", PlanFlags(device="h100-80gb",
                                                             context=131072, concurrency=2),
                                DeployFlags(tensor_parallel_size=4, engine="vllm"))
    ws = load_workbook(books["qwen36-tp4-vllm-long"][3], data_only=True)["Ranks"]
    assert ws.cell(row=_rows(ws)["attention_block_size"], column=3).value \
        == dep.plan.budget.block_size_tokens > 16


def test_the_start_verdict_recalculates_to_the_plan(books) -> None:
    """vLLM starts when its pool holds a request and what runs after the pool fits the room it
    leaves: the room is a formula, the graphs and the warm-up the plan's values. The plan is
    the one plan --from-workbook makes (the recorded scenario: a release's own batch stays its
    default, where the Inputs alone would declare the plain plan's 8,192)."""
    from servecap.cli.workbook_scenario import workbook_scenario
    from servecap.scenario.deployment import deployment

    vllm = [name for name, (_, out, _, _) in books.items() if out["engine"] == "vllm"]
    assert len(vllm) >= 20 and set(AFTER_POOL) <= set(vllm)
    for name in vllm:
        code, out, path, computed = books[name]
        wb = load_workbook(computed, data_only=True)
        assert cell_of(wb, "deployment_starts").value is out["starts"], name
        rows, ws = _rows(wb["Ranks"]), wb["Ranks"]
        dep = deployment(workbook_scenario(path).scenario)
        columns = [item for item in dep.stages for _ in item.ranks]
        for i, item in enumerate(columns):
            assert ws.cell(row=rows["starts"], column=3 + i).value is item.plan.starts, name
            if item.plan.after_pool is not None:
                assert ws.cell(row=rows["after_pool_room"], column=3 + i).value \
                    == item.plan.after_pool.room_bytes, (name, i)
    for name in AFTER_POOL:
        code, out, _, computed = books[name]
        ws = load_workbook(computed, data_only=True)["Ranks"]
        rows = _rows(ws)
        assert code == 1 and out["starts"] is False and out["fits"] is False, name
        assert all(rank["num_gpu_blocks"] >= rank["blocks_per_request"] for rank in out["ranks"])
        needed = [ws.cell(row=rows[k], column=3).value
                  for k in ("after_pool_graphs", "after_pool_warmup", "after_pool_room")]
        assert needed[0] + needed[1] > needed[2] > 0, (name, needed)
        assert "sampler warm-up" in out["start_advice"]["text"], name


def test_the_sheet_says_the_start_check_is_the_plans(books) -> None:
    wb = load_workbook(books["8b-vllm-after-pool"][2])
    ws, rows = wb["Ranks"], _rows(wb["Ranks"])
    notes = [c.value for c in ws["B"] if isinstance(c.value, str) and "warm-up" in c.value]
    assert any("plan's estimates at max_num_seqs 1,024" in n and "--from-workbook" in n
               for n in notes), notes
    for key in ("after_pool_graphs", "after_pool_warmup", "after_pool_outside"):
        assert isinstance(ws.cell(row=rows[key], column=3).value, int), key
        assert "plan's" in ws.cell(row=rows[key], column=2).value, key
    for key in ("after_pool_room", "starts", "fits"):
        assert str(ws.cell(row=rows[key], column=3).value).startswith("="), key
    assert "after_pool_room" not in _rows(load_workbook(books["gemma-tp2-sglang"][2])["Ranks"])


@pytest.fixture(scope="module")
def start_what_ifs(books, soffice_bin, tmp_path_factory) -> dict[str, Path]:
    """gpu_memory_utilization typed in the cell: 0.99 -> 0.9 on a hybrid that did not start,
    0.92 -> 0.99 on a windowed model that did (one LibreOffice run)."""
    folder = tmp_path_factory.mktemp("start-what-ifs")
    edits = {"qwen36-tp4-vllm-after-pool": 0.9, "gemma-tp2-vllm-window": 0.99}
    for name, value in edits.items():
        wb = load_workbook(books[name][2])
        cell_of(wb, "gpu_memory_utilization").value = value
        wb.save(folder / f"{name}.xlsx")
    return recalc(soffice_bin, [folder / f"{name}.xlsx" for name in edits],
                  folder / "recalculated")


@pytest.mark.parametrize("name,util,starts", [("qwen36-tp4-vllm-after-pool", "0.9", True),
                                              ("gemma-tp2-vllm-window", "0.99", False)])
def test_an_edited_utilization_moves_the_start_verdict(books, start_what_ifs, name, util,
                                                       starts) -> None:
    args = list(VARIANTS[name])
    if "--gpu-memory-utilization" in args:
        at = args.index("--gpu-memory-utilization")
        del args[at:at + 2]
    code, flagged = _plan([*args, "--gpu-memory-utilization", util])
    assert flagged["starts"] is starts and code == (0 if starts else 1)
    wb = load_workbook(start_what_ifs[name], data_only=True)
    assert cell_of(wb, "deployment_starts").value is starts
    assert cell_of(wb, "deployment_fits").value is flagged["fits"]
    ws, rows = wb["Ranks"], _rows(wb["Ranks"])
    for i, rank in enumerate(flagged["ranks"]):
        assert ws.cell(row=rows["fits"], column=3 + i).value is rank["fits"], (name, i)
        assert ws.cell(row=rows["num_gpu_blocks"], column=3 + i).value == rank["num_gpu_blocks"]
    assert _plan(["--from-workbook", str(start_what_ifs[name])]) == (code, flagged)


@pytest.fixture(scope="module")
def what_ifs(books, soffice_bin, tmp_path_factory) -> dict[str, Path]:
    """The Nemotron-3-Nano tp 2 vLLM workbook with tp 4, and with vLLM's other Mamba cache
    modes, typed in its cells (one LibreOffice run)."""
    folder = tmp_path_factory.mktemp("what-ifs")
    edits = {"tp4": ("tensor_parallel_size", 4), "all": ("mamba_cache_mode", "all"),
             "none": ("mamba_cache_mode", "none")}
    paths = []
    for name, (cell, value) in edits.items():
        wb = load_workbook(books["nemotron-3-nano-30b-a3b-tp2-vllm"][2])
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
    _, tp4 = _plan([*NEMOTRON_TP2[:tp], "-tp", "4", *NEMOTRON_TP2[tp + 2:]])
    rows, lines = _rows(ws), {line["key"]: line["bytes"] for line in tp4["ranks"][0]["lines"]}
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
    rows, budget = _rows(ws), dep.plan.budget
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


def test_an_edited_hybrid_workbook_replans_like_the_flags(books, tmp_path) -> None:
    wb = load_workbook(books["qwen36-tp4-vllm-long"][2])
    cell_of(wb, "context_tokens").value = 65536
    cell_of(wb, "kv_dtype").value = "fp8"
    cell_of(wb, "gpu_memory_utilization").value = 0.85
    wb.save(tmp_path / "edited.xlsx")
    _, edited = _plan(["--from-workbook", str(tmp_path / "edited.xlsx")])
    args = VARIANTS["qwen36-tp4-vllm-long"]
    args = args[:args.index("--context")] + ["--context", "65536", "--concurrency", "2"]
    _, flagged = _plan([*args, "--kv-dtype", "fp8", "--gpu-memory-utilization", "0.85"])
    assert edited == flagged and edited["state_bytes_per_request"] > 0


def test_ranks_are_formulas_over_named_inputs(books) -> None:
    wb = load_workbook(books["70b-tp4-vllm"][2])
    ws, rows = wb["Ranks"], _rows(wb["Ranks"])
    for key in ("kv_cache", "kv_pool_bytes", "num_gpu_blocks", "max_concurrency", "free"):
        assert str(ws.cell(row=rows[key], column=3).value).startswith("="), key
    assert "gpu_memory_utilization" in ws.cell(row=rows["pool"], column=3).value
    assert [ws.cell(row=1, column=c).value for c in range(3, 7)] == [
        f"rank {r}" for r in range(4)]


@pytest.mark.parametrize("saved_by", ["servecap", "libreoffice"])
def test_from_workbook_replans_every_deployment(books, saved_by) -> None:
    for name, (code, out, path, computed) in books.items():
        book = path if saved_by == "servecap" else computed
        again_code, again = _plan(["--from-workbook", str(book)])
        assert (again_code, again) == (code, out), name


def test_an_edited_utilization_replans_like_the_flag(books, tmp_path) -> None:
    wb = load_workbook(books["70b-tp4-vllm"][2])
    cell_of(wb, "gpu_memory_utilization").value = 0.8
    wb.save(tmp_path / "edited.xlsx")
    _, edited = _plan(["--from-workbook", str(tmp_path / "edited.xlsx")])
    _, flagged = _plan([*VARIANTS["70b-tp4-vllm"], "--gpu-memory-utilization", "0.8"])
    assert edited == flagged


def test_deploy_flags_with_from_workbook_are_refused(books) -> None:
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(books["8b-pp3-plain"][2]),
                                 "-tp", "2"])
    assert result.exit_code == 2 and "give the workbook alone" in result.output


def test_cached_values_equal_what_libreoffice_computes(books) -> None:
    """Readers that do not recalculate (openpyxl data_only, pandas) see servecap's numbers."""
    for name, (_, out, path, computed) in books.items():
        count, wrong = cached_mismatches(path, computed)
        assert count >= 20 * len(out["ranks"]) and not wrong, (name, wrong[:5])
    name = "70b-tp4-vllm"
    frame = pandas.read_excel(books[name][2], sheet_name="Ranks", header=0, index_col=0)
    assert frame.loc["num_gpu_blocks", "rank 0"] == books[name][1]["num_gpu_blocks"]
    assert frame.loc["committed", "rank 3"] == books[name][1]["ranks"][3]["committed_bytes"]


def test_summary_comes_first_and_states_the_answer(books) -> None:
    for name, (code, out, _path, computed) in books.items():
        wb = load_workbook(computed, data_only=True)
        assert wb.sheetnames[:4] == ["Summary", "Inputs", "Ledger", "Ranks"], name
        values = {row[0]: row[1] for row in wb["Summary"].iter_rows(min_row=2, values_only=True)}
        assert values["verdict"] == ("FITS" if code == 0 else "DOES NOT FIT"), name
        assert values["memory ceiling per replica"] == out["memory_ceiling_requests"], name
        assert values["ceiling, all replicas"] == out["total_ceiling_requests"], name
        assert values["binding rank"] == out["binding_rank"], name
        assert f"engine {out['engine']}" in values["parallelism"], name
        # the lines are the Ranks sheet's under the engine: the Ledger sheet's one-GPU plain
        # sources (its 10 % safety) would contradict the verdict
        assert values["lines from"] == (f"the Ranks sheet: each rank's lines under "
                                        f"{out['engine']}, rank {out['binding_rank']} binds")
        assert "safety from" not in values and "1 GPUs" not in values["parallelism"], name
    rules = load_workbook(books["70b-tp4-vllm"][2])["Summary"].conditional_formatting
    formulas = [rule.formula[0] for cf in rules for rule in cf.rules]
    assert formulas == ['$B$7="FITS"', '$B$7<>"FITS"']
