"""--enable-lora on plan: a pasted vLLM line plans the adapter slots (lora_bytes), vLLM's pool
shrinks by them, and a bad LoRA knob is one line naming the flag, exit 2."""

import json
from pathlib import Path

import pytest

DIR = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs"
          / "meta-llama--Llama-3.1-8B-Instruct")
LINE = ("--device", "h100-80gb", "--json", "--", "vllm", "serve", DIR)
LORA = ("--enable-lora", "--max-loras", "4", "--max-lora-rank", "64")


def _plan(run, *extra):
    result = run("plan", *LINE, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_lora_slots_lower_vllms_pool_and_ceiling(run):
    base, lora = _plan(run), _plan(run, *LORA)
    assert base["lora_bytes"] == 0 and lora["lora_bytes"] == 1_477_705_728
    # vLLM subtracts the slots with the weights ('Model loading took'): the pool shrinks by
    # whole blocks of 2 MiB, and with it the cache tokens and the concurrency it logs
    assert lora["kv_pool_bytes"] == base["kv_pool_bytes"] - lora["lora_bytes"]
    assert lora["num_gpu_blocks"] < base["num_gpu_blocks"]
    assert lora["max_concurrency"] < base["max_concurrency"]
    assert lora["lora_host_bytes"] == lora["lora_bytes"]  # 4 adapters on the host too
    assert [item["key"] for item in lora["host_lines"]] == ["lora_host"]


def test_the_integer_ceiling_drops_where_requests_are_short(run):
    base = _plan(run, "--max-model-len", "8192")
    lora = _plan(run, "--max-model-len", "8192", *LORA)
    assert lora["memory_ceiling_requests"] < base["memory_ceiling_requests"]


def test_each_rank_holds_its_own_slots_and_host_copies(run):
    one = _plan(run, *LORA, "--max-cpu-loras", "8")
    two = _plan(run, *LORA, "--max-cpu-loras", "8", "-tp", "2")
    assert [r["lora_bytes"] for r in two["ranks"]] == [two["lora_bytes"]] * 2
    assert two["lora_bytes"] < one["lora_bytes"]  # B of q/k/v/gate/up, A of o/down split
    assert two["lora_host_bytes"] == one["lora_host_bytes"] == 2 * one["lora_bytes"]


def test_target_modules_take_several_words(run):
    some = _plan(run, *LORA, "--lora-target-modules", "o_proj", "qkv_proj")
    assert 0 < some["lora_bytes"] < _plan(run, *LORA)["lora_bytes"]


@pytest.mark.parametrize(("extra", "needle"), [
    (("--max-loras", "4"), "--max-loras = 4: applies with --enable-lora"),
    (("--enable-lora", "--max-lora-rank", "48"), "--max-lora-rank = 48: one of 1, 8"),
    (("--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"), "at least --max-loras"),
    (("--enable-lora", "--lora-dtype", "float32"), "auto, float16 or bfloat16"),
    (("--enable-lora", "--lora-target-modules"), "needs one value or more"),
    (("--enable-lora", "--lora-extra-vocab-size", "512"), "only 256 (the default)"),
])
def test_bad_lora_knobs_are_one_line(run, extra, needle):
    result = run("plan", *LINE, *extra)
    assert result.exit_code == 2, result.output
    assert "\n" not in result.stderr.strip() and needle in result.stderr


def test_another_engines_lora_pool_is_refused(run):
    result = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--engine", "sglang",
                 "--scenario", _scenario_with_lora(run))
    assert result.exit_code == 2 and "not sglang's own adapter pool" in result.stderr


def _scenario_with_lora(run) -> str:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "lora.yaml"
    path.write_text("lora:\n  enable_lora: true\n")
    return str(path)
