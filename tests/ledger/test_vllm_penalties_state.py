"""Model Runner V2's penalties state: output_bin_counts (max_num_seqs x vocabulary int32) and
prompt_bin_mask (max_num_seqs x ceil(vocabulary / 32) int32), made with the sampler on the last
pipeline stage after the weights load (vllm/v1/worker/gpu/sample/penalties.py at v0.27.1). A
release whose budget is the free-memory drop (0.27 on) counts it in the pool's subtraction; one
that counts the torch peak's increase (0.22-0.26) leaves it outside, so the room after the pool
holds it. Golden figure: kubesimplify's Qwen3-32B TP 2 start on 0.27.1 (tests/fixtures/vllm_logs),
an 8.22 GiB pool the plan exceeded by 0.58 GiB without the state."""

import json

from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.units import GiB
from servecap.ledger.vllm_profile import NON_TORCH_PROFILED, non_torch_estimate, penalties_state
from servecap.ledger.vllm_versions import row

QWEN3_32B = "tests/fixtures/configs/Qwen--Qwen3-32B"
VOCAB = 151_936  # Qwen3's


def _spec():
    from servecap.model_configs import load_model

    return load_model(QWEN3_32B).spec


def _plan(engine: str, *extra: str) -> dict:
    result = CliRunner().invoke(app, ["plan", QWEN3_32B, "--device", "rtx-pro-6000-96gb",
                                      "--engine", engine, "--context", "32768",
                                      "--gpu-memory-utilization", "0.426", "--json", *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _line(plan: dict, key: str) -> dict:
    return next(line for line in plan["lines"] if line["key"] == key)


def test_the_state_is_max_num_seqs_rows_of_counts_and_a_bit_mask():
    spec = _spec()
    assert spec.vocab_size == VOCAB
    assert penalties_state(spec, 1024) == 1024 * (VOCAB + 4748) * 4  # ceil(151,936 / 32)
    assert penalties_state(spec, 1024) / GiB > 0.59
    assert penalties_state(spec, 40) == 40 * (VOCAB + 4748) * 4
    assert penalties_state(spec, 0) == 0


def test_only_a_release_that_counts_the_free_memory_drop_subtracts_it():
    spec = _spec()
    state = penalties_state(spec, 256)
    consumed, profiled = row("0.27.1"), row("0.26.0")
    assert non_torch_estimate(consumed, state)[0] == NON_TORCH_PROFILED + state
    assert "penalties state" in non_torch_estimate(consumed, state)[1]
    assert non_torch_estimate(profiled, state)[0] == NON_TORCH_PROFILED
    assert non_torch_estimate(consumed, 0)[0] == NON_TORCH_PROFILED


def test_the_plan_subtracts_it_on_0_27_and_max_num_seqs_scales_it():
    plan = _plan("vllm==0.27.1", "-tp", "2")
    non_torch = _line(plan, "non_torch")
    # the RTX PRO 6000's 96 GB takes the >= 70 GiB defaults: 1,024 sequences
    assert non_torch["bytes"] == NON_TORCH_PROFILED + 1024 * (VOCAB + 4748) * 4
    assert "Model Runner V2's penalties state 0.60 GiB" in non_torch["from"]
    fewer = _plan("vllm==0.27.1", "-tp", "2", "--max-num-seqs", "64")
    assert _line(fewer, "non_torch")["bytes"] == NON_TORCH_PROFILED + 64 * (VOCAB + 4748) * 4
    # the pool grows by at least what the smaller state frees, to whole blocks (the smaller
    # profile sampler frees more)
    block = plan["ranks"][0]["block_bytes"]
    assert fewer["kv_pool_bytes"] - plan["kv_pool_bytes"] >= 960 * (VOCAB + 4748) * 4 - block


def test_only_the_last_pipeline_stage_holds_it():
    plan = _plan("vllm==0.27.1", "-pp", "2")
    ranks = plan["ranks"]
    assert [r["holds_lm_head"] for r in ranks] == [False, True]
    by_stage = [next(x for x in r["lines"] if x["key"] == "non_torch")["bytes"] for r in ranks]
    assert by_stage == [NON_TORCH_PROFILED, NON_TORCH_PROFILED + 1024 * (VOCAB + 4748) * 4]


def test_a_profiled_release_leaves_it_outside_the_budget_for_the_room_after_the_pool():
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags, deployment_from_flags

    deployment = deployment_from_flags(
        QWEN3_32B, PlanFlags(device="rtx-pro-6000-96gb", context=32768, concurrency=1),
        DeployFlags(engine="vllm==0.26.0", tensor_parallel_size=2,
                    gpu_memory_utilization=0.426))
    plan = deployment.plan
    after = plan.after_pool
    assert after is not None
    assert plan.line("non_torch") == NON_TORCH_PROFILED
    assert row("0.26.0").profile == "profiled"
    state = 1024 * (VOCAB + 4748) * 4
    assert "penalties state 0.60 GiB" in after.how
    assert after.outside_bytes >= state


def test_the_v1_runner_holds_none():
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags, deployment_from_flags

    deployment = deployment_from_flags(
        QWEN3_32B, PlanFlags(device="h100-80gb", context=8192, concurrency=1),
        DeployFlags(engine="vllm==0.19.0"))
    plan = deployment.plan
    assert plan.line("non_torch") == NON_TORCH_PROFILED
    assert "penalties" not in plan.after_pool.how

