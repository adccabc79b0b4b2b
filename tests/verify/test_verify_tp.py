"""verify --tensor-parallel-size 2 on the CPU: two gloo ranks, each reconciling its own shard."""

import json

import pytest
from servecap.cli.app import app
from typer.testing import CliRunner

WHOLE_WEIGHTS = 106_816 * 4  # tiny-llama, fp32
REPLICATED = (2 * 256 * 64 + 5 * 64) * 4  # embeddings, lm_head and norms live on every rank


@pytest.fixture(scope="module")
def two_ranks():
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu",
                                      "--tensor-parallel-size", "2", "--output-tokens", "4",
                                      "--json"])
    return result, json.loads(result.stdout)


def _line(rank: dict, name: str) -> dict:
    return next(item for item in rank["lines"] if item["line"] == name)


def test_each_rank_holds_its_shard_and_reconciles_its_pool(two_ranks) -> None:
    _, out = two_ranks
    assert out["tensor_parallel_size"] == 2 and len(out["ranks"]) == 2
    weights = [_line(rank, "weights")["measured_bytes"] for rank in out["ranks"]]
    assert sum(weights) == WHOLE_WEIGHTS + REPLICATED
    for rank in out["ranks"]:
        pool = _line(rank, "kv_pool")
        assert pool["verdict"] == "ok" and pool["residual_bytes"] == 0
        assert rank["measured_ceiling_requests"] == rank["predicted_ceiling_requests"] == 31
        assert rank["latency"]["num_finished"] == rank["latency"]["num_requests"] == 4
        assert "tensor_parallel_size 2" in rank["record"]["topology"]


def test_the_whole_model_weights_line_is_named_per_rank(two_ranks) -> None:
    result, out = two_ranks
    assert result.exit_code == 1
    assert out["violations"] == ["rank 0: weights", "rank 1: weights"]
    assert "rank 0: weights (measured" in result.stderr
    assert out["binding_rank"] == 0
    assert out["lines"] == out["ranks"][0]["lines"]


def test_a_split_that_does_not_divide_the_heads_is_one_line() -> None:
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--tensor-parallel-size", "3"])
    assert result.exit_code == 2
    assert "tensor_parallel_size" in result.stderr and "Traceback" not in result.output
