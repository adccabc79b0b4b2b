"""reconcile planned a log under its memory row's first release (the row's pin: vllm==0.8.0 for
a 0.8.5 log), so batch defaults that changed inside the row were the wrong release's: a 0.8.5
start on 4 x A10 was profiled with 0.8.0's 1,024 sequences on every GPU (KV -17.5%) where
0.8.5 gives a 24 GiB GPU 256."""

from pathlib import Path

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags, plan_scenario
from servecap.scenario.engine import engine_spec
from servecap.scenario.reconciliation import predict

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "fixtures" / "vllm_logs" / "v1_qwen3_30b_a3b_4xa10_issue17469.log"
CONFIG = ROOT / "tests" / "fixtures" / "configs" / "Qwen--Qwen3-30B-A3B"


def test_a_logs_release_picks_its_batch_defaults_not_its_rows_first() -> None:
    scenario = plan_scenario(str(CONFIG), PlanFlags(device="a10-24gb", concurrency=1),
                             DeployFlags(engine="vllm==0.8.5", tensor_parallel_size=4))
    found = predict(LOG, scenario)
    engine = engine_spec(found.scenario)
    assert engine.vllm_row.tag == "v0.8.0" and engine.release == (0, 8, 5)
    peak = next(line.source for line in found.planned.plan.lines if line.key == "runtime_peak")
    assert "sampler of 256 x" in peak and "from v0.8.5" in peak, peak
