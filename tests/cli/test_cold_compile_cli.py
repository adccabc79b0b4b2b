"""`servecap plan --cold-compile`: the plan of a start whose torch.compile cache is cold, and
reconcile reading a cold start from the log ('Compiling a graph for')."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
QWEN = str(ROOT / "configs" / "Qwen--Qwen3-8B")
# the cold RunPod start's deployment (its sidecar): the RTX 4090's 23.52 GiB as logged
FLAGS = ("plan", QWEN, "--device", "23.52GiB", "--engine", "vllm==0.27.1", "--context", "8192",
         "--gpu-memory-utilization", "0.92", "--json")


def _line(report, key):
    return next(x for x in report["lines"] if x["key"] == key)


def test_plan_is_warm_by_default_and_cold_with_the_flag(run):
    warm, cold = run(*FLAGS), run(*FLAGS, "--cold-compile")
    assert warm.exit_code == cold.exit_code == 0, cold.output
    w, c = json.loads(warm.stdout), json.loads(cold.stdout)
    assert _line(c, "runtime_peak")["bytes"] > _line(w, "runtime_peak")["bytes"]
    assert "cold torch.compile" in _line(c, "runtime_peak")["from"]
    assert "cold torch.compile" not in _line(w, "runtime_peak")["from"]
    assert c["kv_cache_tokens"] == 34_928 < w["kv_cache_tokens"]  # the cold log: 35,792


def test_reconcile_plans_the_cold_log_cold_and_agrees_with_it(run):
    log = ROOT / "vllm_logs" / "v0_27_qwen3_8b_rtx4090_cold_coldstartrecon.log"
    result = run("reconcile", log, "--model", QWEN, "--device", "23.52GiB", "--max-model-len",
                 "8192", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    assert any("planned as --cold-compile" in n for n in report["notes"])
    tokens = {r["key"]: r for r in report["rows"]}["kv_cache_tokens"]
    assert abs(tokens["predicted"] / tokens["logged"] - 1) < 0.05  # 34,928 against 35,792


def test_help_teaches_the_flag(run):
    out = run("plan", "--help").output
    assert "--cold-compile" in out


def test_diff_names_the_release_whose_compile_benchmarks_kernels(run):
    """A cold start of Qwen3-8B on the 4090 across 0.11.0 (no kernel benchmarks) and 0.12
    (rows from 0.11.2 benchmark combo kernels), 16 sequences so that the table's copy is wider
    than the sampler pass: the runtime peak moves and the rule is named; the same diff of a
    warm start does not name it."""
    args = ("diff", QWEN, "--device", "23.52GiB", "--context", "8192", "--max-num-seqs", "16",
            "--engine",
            "vllm==0.11.0", "--against", "vllm==0.12", "--json")

    def rules(result):
        out = json.loads(result.stdout)
        peak = next(f for s in ("lines", "pool", "outcome") for f in out[s]
                    if f["key"] == "runtime_peak")
        return " ".join(r["rules"] if isinstance(r["rules"], str) else " ".join(r["rules"])
                        for r in peak["reasons"])

    cold, warm = run(*args, "--cold-compile"), run(*args)
    assert cold.exit_code in (0, 1) and warm.exit_code in (0, 1), cold.output
    assert "cold torch.compile benchmarks kernels" in rules(cold)
    assert "cold torch.compile" not in rules(warm)
