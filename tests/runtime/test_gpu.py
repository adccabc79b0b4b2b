"""On a CUDA device the same engine runs unchanged and matches the dense reference."""

import pytest
import torch

from servecap.runtime.engine import Engine, EngineConfig
from servecap.runtime.kv_pool import KVPool
from servecap.runtime.weights import random_decoder

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_cuda_engine_matches_dense_reference(tiny_spec, dense_greedy) -> None:
    model = random_decoder(tiny_spec("qwen3"), "fp32", device="cuda", seed=4)
    engine = Engine(model, KVPool(model.spec, 64, 4, "fp32", "cuda"),
                    EngineConfig(max_num_batched_tokens=7))
    prompts = [[(5 * i + j) % 256 for j in range(3 + 4 * i)] for i in range(5)]
    records = [engine.add_request(p, 8) for p in prompts]
    while engine.has_unfinished():
        engine.step()
    assert [r.output_token_ids for r in records] == [dense_greedy(model, p, 8) for p in prompts]
    assert engine.pool.tensor.is_cuda and engine.blocks.num_free_blocks == 64


def test_cuda_bf16_weights_equal_the_ledger(tiny_spec) -> None:
    from servecap.ledger.weights import weight_bytes

    model = random_decoder(tiny_spec(), "bf16", device="cuda")
    assert model.weight_bytes == weight_bytes(tiny_spec(), 16, None).param_bytes


@pytest.mark.parametrize("model_type", ["nemotron_h", "qwen3_next"])
def test_cuda_hybrid_engine_matches_the_cpu_engine(model_type) -> None:
    """The state layers' scans and the state pool run on CUDA and give the CPU's tokens."""
    from hf_reference import hybrid_spec

    from servecap.runtime.state_pool import StatePool

    spec = hybrid_spec(model_type)
    prompts = [[(5 * i + j) % 256 for j in range(3 + 30 * i)] for i in range(4)]
    outputs = []
    for device in ("cpu", "cuda"):
        model = random_decoder(spec, "fp32", device=device, seed=4)
        engine = Engine(model, KVPool(spec, 64, 4, "fp32", device),
                        EngineConfig(max_num_batched_tokens=40), StatePool(spec, 4, device))
        records = [engine.add_request(p, 8) for p in prompts]
        while engine.has_unfinished():
            engine.step()
        outputs.append([r.output_token_ids for r in records])
    assert outputs[0] == outputs[1]
