"""MoE under tensor parallelism on the CPU: two gloo ranks, each holding its share of every
expert's columns (vLLM's TP MoE), of the shared expert, of the latent attention's heads and of
the sinks, generate what one process does from the same transformers-written checkpoint, and
each rank's weights are the ledger's shard to the byte."""

import json

import pytest
import torch.multiprocessing as mp

transformers = pytest.importorskip("transformers")

from moe_checkpoints import save_moe  # noqa: E402
from moe_ranks import generate, rank  # noqa: E402

from servecap.ledger.kv import Shard  # noqa: E402
from servecap.ledger.plan import build_plan  # noqa: E402
from servecap.ledger.serve import ServeSpec  # noqa: E402
from servecap.model_configs import load_model  # noqa: E402
from servecap.runtime.parallel import SINGLE  # noqa: E402

CASES = ("deepseek_v3", "gpt_oss")  # latent heads, shared and grouped experts; sinks, biases


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> tuple[dict, list[dict]]:
    """{case: checkpoint directory} and both ranks' results (a rank that wrote its results
    and then died in gloo's teardown still counts, as in test_tensor_parallel.py)."""
    tmp = tmp_path_factory.mktemp("moe-tp")
    directories = {}
    for case in CASES:
        directories[case] = str(tmp / case)
        save_moe(transformers, case, directories[case])
    out = [tmp / f"out.{r}" for r in range(2)]
    try:
        mp.spawn(rank, args=(2, str(tmp / "init"), str(tmp / "out"),
                              list(directories.values())), nprocs=2, join=True)
    except mp.ProcessExitedException:
        if not all(path.exists() for path in out):
            raise
    return directories, [json.loads(path.read_text()) for path in out]


@pytest.mark.parametrize("case", CASES)
def test_two_ranks_generate_what_one_process_does(two_ranks, case: str) -> None:
    directories, ranks = two_ranks
    directory = directories[case]
    expected = generate(directory, SINGLE)["tokens"]
    assert ranks[0][directory]["tokens"] == ranks[1][directory]["tokens"] == expected
    spec = load_model(directory).spec
    serve = ServeSpec(device_bytes=2**30, context_tokens=64, concurrency=1, weight_dtype="fp32",
                      activation_dtype="fp32", runtime_peak_bytes=0)
    ledger = build_plan(spec, serve, shard=Shard(2)).line("weights")
    assert all(r[directory]["weights"] == ledger for r in ranks)
