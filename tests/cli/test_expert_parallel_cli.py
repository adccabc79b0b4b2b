"""plan takes -dp N --enable-expert-parallel from a vLLM launch line and plans each rank with
its share of the routed experts, saying so (ledger/experts.py)."""

import json


def test_a_launch_line_with_dp_and_expert_parallel_is_planned_per_rank(run) -> None:
    line = ["--device", "h200", "--json", "--", "vllm", "serve", "qwen3-30b-a3b",
            "--max-model-len", "4096"]
    one = json.loads(run("plan", *line).stdout)
    ep = json.loads(run("plan", *line, "-dp", "8", "--enable-expert-parallel").stdout)
    assert ep["data_parallel_size"] == 8 and ep["weights_bytes"] < one["weights_bytes"] / 4
    assert any("routed experts whole" in note for note in ep["notes"])
