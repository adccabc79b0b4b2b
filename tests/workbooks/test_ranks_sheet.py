"""Multi-GPU and engine plans: the Ranks sheet recalculates in LibreOffice to plan --json, rank
by rank, and --from-workbook replans the file (also after LibreOffice saved it)."""

import math

import pandas
import pytest
from conftest import cached_mismatches
from openpyxl import load_workbook
from ranks_books import AFTER_POOL, LOG, ROWS, RUNNER, TOTALS, VARIANTS, plan_json, sheet_rows

from servecap.cli.app import app
from servecap.ledger.vllm_log import parse_vllm_log
from servecap.workbooks.names import cell_of


def test_many_models_and_engines_are_covered(engine_books) -> None:
    assert len(engine_books) >= len(VARIANTS) + 8
    assert {out["engine"] for _, out, _, _ in engine_books.values()} == {"plain", "vllm", "sglang",
                                                                  "trtllm"}


def test_every_rank_recalculates_to_plan_json(engine_books) -> None:
    """Integers byte for byte; max concurrency to the 15 significant digits xlsx stores."""
    for name, (_, out, _, computed) in engine_books.items():
        wb = load_workbook(computed, data_only=True)
        ws, rows = wb["Ranks"], sheet_rows(wb["Ranks"])
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
                if rank.get(key) is None:  # null: no engine pool under plain
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


def test_the_real_hybrid_log_recalculates_to_what_vllm_printed(engine_books) -> None:
    """300 blocks, 4.35x, 569,878 tokens (docs/hybrid.md derives them by hand): the page
    arithmetic as LibreOffice computes it from the workbook's cells."""
    facts = parse_vllm_log(LOG.read_text())
    _, _, path, computed = engine_books["qwen36-5090-log"]
    ws = load_workbook(computed, data_only=True)["Ranks"]
    rows = sheet_rows(ws)
    assert ws.cell(row=rows["attention_block_size"], column=3).value == 2096
    assert ws.cell(row=rows["page_bytes"], column=3).value == 2_146_304
    pool = facts.gib_bytes("kv_pool_gib")  # the log prints the pool and concurrency, not blocks
    assert ws.cell(row=rows["num_gpu_blocks"], column=3).value == pool // 2_146_304 // 10 == 300
    assert f"{ws.cell(row=rows['max_concurrency'], column=3).value:.2f}" \
        == f"{facts.max_concurrency:.2f}"
    assert ws.cell(row=rows["kv_cache_tokens"], column=3).value == facts.kv_cache_tokens
    formula = load_workbook(path)["Ranks"].cell(row=rows["attention_block_size"], column=3).value
    assert "mamba_cache_mode" in formula and "LCM(" in formula


def test_a_hybrid_block_size_and_page_recalculate_to_the_deployment(engine_books) -> None:
    """The attention block raised to hold a state, the page every group shares, per rank."""
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags
    from servecap.cli.plan_cmd import deployment_from_flags

    count = 0
    for name, (_, out, _, computed) in engine_books.items():
        ws = load_workbook(computed, data_only=True)["Ranks"]
        rows = sheet_rows(ws)
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
    ws = load_workbook(engine_books["qwen36-tp4-vllm-long"][3], data_only=True)["Ranks"]
    assert ws.cell(row=sheet_rows(ws)["attention_block_size"], column=3).value \
        == dep.plan.budget.block_size_tokens > 16


def test_the_start_verdict_recalculates_to_the_plan(engine_books) -> None:
    """vLLM starts when its pool holds a request and what runs after the pool fits the room it
    leaves: the room is a formula, the graphs and the warm-up the plan's values. The plan is
    the one plan --from-workbook makes (the recorded scenario: a release's own batch stays its
    default, where the Inputs alone would declare the plain plan's 8,192)."""
    from servecap.cli.workbook_scenario import workbook_scenario
    from servecap.scenario.deployment import deployment

    vllm = [name for name, (_, out, _, _) in engine_books.items() if out["engine"] == "vllm"]
    assert len(vllm) >= 20 and set(AFTER_POOL) <= set(vllm)
    for name in vllm:
        code, out, path, computed = engine_books[name]
        wb = load_workbook(computed, data_only=True)
        assert cell_of(wb, "deployment_starts").value is out["starts"], name
        rows, ws = sheet_rows(wb["Ranks"]), wb["Ranks"]
        dep = deployment(workbook_scenario(path).scenario)
        columns = [item for item in dep.stages for _ in item.ranks]
        for i, item in enumerate(columns):
            assert ws.cell(row=rows["starts"], column=3 + i).value is item.plan.starts, name
            if item.plan.after_pool is not None:
                assert ws.cell(row=rows["after_pool_room"], column=3 + i).value \
                    == item.plan.after_pool.room_bytes, (name, i)
    for name in AFTER_POOL:
        code, out, _, computed = engine_books[name]
        ws = load_workbook(computed, data_only=True)["Ranks"]
        rows = sheet_rows(ws)
        assert code == 1 and out["starts"] is False and out["fits"] is False, name
        assert all(rank["num_gpu_blocks"] >= rank["blocks_per_request"] for rank in out["ranks"])
        needed = [ws.cell(row=rows[k], column=3).value
                  for k in ("after_pool_graphs", "after_pool_warmup", "after_pool_room")]
        assert needed[0] + needed[1] > needed[2] > 0, (name, needed)
        assert "sampler warm-up" in out["start_advice"]["text"], name


def test_the_sheet_says_the_start_check_is_the_plans(engine_books) -> None:
    wb = load_workbook(engine_books["8b-vllm-after-pool"][2])
    ws, rows = wb["Ranks"], sheet_rows(wb["Ranks"])
    notes = [c.value for c in ws["B"] if isinstance(c.value, str) and "warm-up" in c.value]
    assert any("plan's estimates at max_num_seqs 1,024" in n and "--from-workbook" in n
               for n in notes), notes
    for key in ("after_pool_graphs", "after_pool_warmup", "after_pool_outside"):
        assert isinstance(ws.cell(row=rows[key], column=3).value, int), key
        assert "plan's" in ws.cell(row=rows[key], column=2).value, key
    for key in ("after_pool_room", "starts", "fits"):
        assert str(ws.cell(row=rows[key], column=3).value).startswith("="), key
    sglang = load_workbook(engine_books["gemma-tp2-sglang"][2])["Ranks"]
    assert "after_pool_room" not in sheet_rows(sglang)


def test_ranks_are_formulas_over_named_inputs(engine_books) -> None:
    wb = load_workbook(engine_books["70b-tp4-vllm"][2])
    ws, rows = wb["Ranks"], sheet_rows(wb["Ranks"])
    for key in ("kv_cache", "kv_pool_bytes", "num_gpu_blocks", "max_concurrency", "free"):
        assert str(ws.cell(row=rows[key], column=3).value).startswith("="), key
    assert "gpu_memory_utilization" in ws.cell(row=rows["pool"], column=3).value
    assert [ws.cell(row=1, column=c).value for c in range(3, 7)] == [
        f"rank {r}" for r in range(4)]


@pytest.mark.parametrize("saved_by", ["servecap", "libreoffice"])
def test_from_workbook_replans_every_deployment(engine_books, saved_by) -> None:
    for name, (code, out, path, computed) in engine_books.items():
        book = path if saved_by == "servecap" else computed
        again_code, again = plan_json(["--from-workbook", str(book)])
        assert (again_code, again) == (code, out), name


def test_an_edited_utilization_replans_like_the_flag(engine_books, tmp_path) -> None:
    wb = load_workbook(engine_books["70b-tp4-vllm"][2])
    cell_of(wb, "gpu_memory_utilization").value = 0.8
    wb.save(tmp_path / "edited.xlsx")
    _, edited = plan_json(["--from-workbook", str(tmp_path / "edited.xlsx")])
    _, flagged = plan_json([*VARIANTS["70b-tp4-vllm"], "--gpu-memory-utilization", "0.8"])
    assert edited == flagged


def test_deploy_flags_with_from_workbook_are_refused(engine_books) -> None:
    result = RUNNER.invoke(app, ["plan", "--from-workbook", str(engine_books["8b-pp3-plain"][2]),
                                 "-tp", "2"])
    assert result.exit_code == 2 and "give the workbook alone" in result.output


def test_cached_values_equal_what_libreoffice_computes(engine_books) -> None:
    """Readers that do not recalculate (openpyxl data_only, pandas) see servecap's numbers."""
    for name, (_, out, path, computed) in engine_books.items():
        count, wrong = cached_mismatches(path, computed)
        assert count >= 20 * len(out["ranks"]) and not wrong, (name, wrong[:5])
    name = "70b-tp4-vllm"
    frame = pandas.read_excel(engine_books[name][2], sheet_name="Ranks", header=0, index_col=0)
    assert frame.loc["num_gpu_blocks", "rank 0"] == engine_books[name][1]["num_gpu_blocks"]
    assert frame.loc["committed", "rank 3"] == engine_books[name][1]["ranks"][3]["committed_bytes"]


def test_summary_comes_first_and_states_the_answer(engine_books) -> None:
    for name, (code, out, _path, computed) in engine_books.items():
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
    rules = load_workbook(engine_books["70b-tp4-vllm"][2])["Summary"].conditional_formatting
    formulas = [rule.formula[0] for cf in rules for rule in cf.rules]
    assert formulas == ['$B$7="FITS"', '$B$7<>"FITS"']
