"""--enable-eplb on a pasted vLLM line: the redundant experts and the balancer's state are a
line of their own (eplb_bytes) inside vLLM's budget; vLLM's refusals are one line, exit 2."""

import json

import pytest

LINE = ("--device", "h200-141gb", "--json", "--", "vllm", "serve", "qwen3-30b-a3b", "-tp", "2",
        "--max-model-len", "8192", "--enable-expert-parallel")
EPLB = ("--enable-eplb", "--eplb-config", '{"num_redundant_experts": 16, "window_size": 500}')


def _plan(run, *extra):
    result = run("plan", *LINE, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_redundant_experts_come_out_of_vllms_pool(run):
    base, eplb = _plan(run), _plan(run, *EPLB)
    line = next(item for item in eplb["lines"] if item["key"] == "eplb")
    assert base["eplb_bytes"] == 0 and eplb["eplb_bytes"] == line["bytes"] > 0
    assert "72 experts a layer where 64 were" in line["from"] and "window 500" in line["from"]
    assert eplb["kv_pool_bytes"] == base["kv_pool_bytes"] - eplb["eplb_bytes"]
    assert [r["eplb_bytes"] for r in eplb["ranks"]] == [eplb["eplb_bytes"]] * 2


def test_the_older_flag_spelling_plans_the_same(run):
    old = _plan(run, "--enable-eplb", "--num-redundant-experts", "16", "--eplb-window-size",
                "500")
    assert old["eplb_bytes"] == _plan(run, *EPLB)["eplb_bytes"]


@pytest.mark.parametrize(("extra", "needle"), [
    (("--no-enable-expert-parallel", "--enable-eplb"), "needs --enable-expert-parallel"),
    (("--eplb-config", '{"num_redundant_experts": 16}'), "needs --enable-eplb"),
    (("--enable-eplb", "--eplb-config", '{"num_redundant_experts": 15}'),
     "must divide by the expert-parallel size 2"),
    (("--enable-eplb", "--eplb-config", '{"redundant": 4}'), "not an EPLBConfig key"),
    (("--enable-eplb", "--eplb-config", "[1]"), "a JSON object"),
])
def test_vllms_refusals_are_one_line(run, extra, needle):
    result = run("plan", *LINE, *extra)
    assert result.exit_code == 2, result.output
    assert "\n" not in result.stderr.strip() and needle in result.stderr
