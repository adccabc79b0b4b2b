"""verify --tensor-parallel-size 2 on the CPU: two gloo ranks, each reconciling its own shard."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

WHOLE_WEIGHTS = 106_816 * 4  # tiny-llama, fp32
NORMS = 5 * 64 * 4  # replicated on every rank; embeddings and lm_head split by vocabulary


@pytest.fixture(scope="module")
def two_ranks():
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu",
                                      "--tensor-parallel-size", "2", "--output-tokens", "4",
                                      "--runtime-peak", "12.5MiB", "--json"])
    return result, json.loads(result.stdout)


def _line(rank: dict, name: str) -> dict:
    return next(item for item in rank["lines"] if item["line"] == name)


def test_each_rank_holds_its_shard_and_reconciles_its_pool(two_ranks) -> None:
    _, out = two_ranks
    assert out["tensor_parallel_size"] == 2 and len(out["ranks"]) == 2
    weights = [_line(rank, "weights")["measured_bytes"] for rank in out["ranks"]]
    assert sum(weights) == WHOLE_WEIGHTS + NORMS
    for rank in out["ranks"]:
        pool = _line(rank, "kv_pool")
        assert pool["verdict"] == "ok" and pool["residual_bytes"] == 0
        assert rank["measured_ceiling_requests"] == rank["predicted_ceiling_requests"] == 27
        assert rank["latency"]["num_finished"] == rank["latency"]["num_requests"] == 4
        assert "tensor_parallel_size 2" in rank["record"]["topology"]


def test_each_ranks_weights_line_is_its_own_shard_exactly(two_ranks) -> None:
    result, out = two_ranks
    assert result.exit_code == 0, result.output
    assert out["violations"] == []
    for rank in out["ranks"]:
        weights = _line(rank, "weights")
        assert weights["predicted_bytes"] == weights["measured_bytes"]
        assert weights["residual_bytes"] == 0 and weights["verdict"] == "ok"
    assert out["lines"] == out["ranks"][out["binding_rank"]]["lines"]


def test_a_split_that_does_not_divide_the_heads_is_one_line() -> None:
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--tensor-parallel-size", "3"])
    assert result.exit_code == 2
    assert "tensor_parallel_size" in result.stderr and "Traceback" not in result.output
