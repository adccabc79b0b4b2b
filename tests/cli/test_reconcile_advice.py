"""reconcile's advice points only at lines the log printed and that differ from the plan, never at
graphs captured after the pool was sized; what it asks for names what the log shows."""

import json
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app

A40_LOG = (Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
           / "v0_26_llama31_8b_a40_vireshkoli.log")

POOL_ONLY = ("INFO 09-10 12:00:00 [gpu_worker.py:276] Available KV cache memory: 30.00 GiB\n"
             "INFO 09-10 12:00:00 [kv_cache_utils.py:849] GPU KV cache size: 245,760 tokens\n")
CAPTURE = ("INFO 09-10 12:00:00 [gpu_model_runner.py] Model loading took 14.99 GiB and 3 s\n"
           "INFO 09-10 12:00:00 [gpu_worker.py] Available KV cache memory: 56.84 GiB\n"
           "INFO 09-10 12:00:00 [gpu_model_runner.py] Graph capturing finished in 9 secs, took "
           "0.52 GiB\n")


def _reconcile(tmp_path, text: str) -> dict:
    log = tmp_path / "vllm.log"
    log.write_text(text)
    result = CliRunner().invoke(app, ["reconcile", str(log), "--model", "llama-3.1-8b",
                                      "--device", "h100-80gb", "--max-model-len", "8192",
                                      "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_log_with_only_the_pool_is_not_told_to_declare_lines_it_lacks(tmp_path) -> None:
    report = _reconcile(tmp_path, POOL_ONLY)
    pool = next(row for row in report["rows"] if row["key"] == "kv_pool")
    assert "declare their logged values" not in pool["advice"]
    assert "prints none of the lines" in pool["advice"]


def test_graphs_captured_after_the_pool_are_not_subtracted(tmp_path) -> None:
    report = _reconcile(tmp_path, CAPTURE)
    assert not [row for row in report["rows"] if row["key"] == "cuda_graphs"]
    assert any("do not declare them as --cuda-graph-memory" in n and "0.52 GiB" in n
               for n in report["notes"])


def test_a_pool_residual_is_not_pinned_on_a_logged_line_that_matches() -> None:
    """An A40 log (vLLM 0.26) whose weights match the plan to the log's rounding: the pool's
    +0.15 GiB was advised 'declare their logged values (--weights)', which would shrink the
    pool, not grow it (the logged weights are 0.01 GiB above the plan). The advice names the
    lines the log does not print instead."""
    result = CliRunner().invoke(app, ["reconcile", str(A40_LOG), "--model", "llama-3.1-8b",
                                      "--device", "44.43GiB", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["key"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows["weights"]["advice"] == "matches"
    pool = rows["kv_pool"]["advice"]
    assert "--weights" not in pool
    assert "the logged weights match the plan" in pool
    assert "lines this log does not print (activation peak, non-torch, estimated here)" in pool



def test_a_missing_model_or_device_is_asked_for_with_what_the_log_shows() -> None:
    """reconcile without --model said only 'required: the model the log served', and without
    --device 'the log does not print total_gpu_memory', though the log names its model
    (meta-llama/Llama-3.1-8B-Instruct) and prints 'Free memory on device (44.17/44.43 GiB)'."""
    runner = CliRunner()
    no_model = runner.invoke(app, ["reconcile", str(A40_LOG)])
    assert no_model.exit_code == 2
    assert "(the log loads 'meta-llama/Llama-3.1-8B-Instruct': its Hub id, a local copy or a " \
           "bundled name)" in no_model.stderr
    no_device = runner.invoke(app, ["reconcile", str(A40_LOG), "--model", "llama-3.1-8b"])
    assert no_device.exit_code == 2 and len(no_device.stderr.strip().splitlines()) == 1
    assert "its 'Free memory on device' line shows 44.43 GiB, rounded to 0.01 GiB " \
           "(--device 44.43GiB plans that)" in no_device.stderr


def test_every_reconcile_option_has_help() -> None:
    """--kv-cache-dtype was listed with no words at all."""
    import typer

    from servecap.cli.reconcile_cmd import reconcile_cmd

    holder = typer.Typer()
    holder.command()(reconcile_cmd)
    command = typer.main.get_command(holder)
    bare = [p.opts[0] for p in command.params
            if p.param_type_name == "option" and not (p.help or "").strip()]
    assert bare == []


def test_the_start_row_says_starts_or_refuses() -> None:
    """The row 'engine starts (1) or refuses (0)' printed 'yes' and 'yes': yes to which?"""
    result = CliRunner().invoke(app, ["reconcile", str(A40_LOG), "--model", "llama-3.1-8b",
                                      "--device", "44.43GiB"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if "engine starts" in line)
    cells = [cell.strip() for cell in row.split("│")]
    assert cells[2:4] == ["starts", "starts"], row
