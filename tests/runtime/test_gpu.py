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


@pytest.mark.parametrize("model_type", ["mixtral", "deepseek_v3", "gpt_oss"])
def test_cuda_moe_engine_matches_the_cpu_engine(model_type, tmp_path) -> None:
    """Routed experts, latent attention and sinks run on CUDA (fp32: the per-expert matmuls)
    and give the CPU's greedy tokens for a checkpoint transformers wrote."""
    transformers = pytest.importorskip("transformers")
    from moe_checkpoints import save_moe

    from servecap.model_configs import load_model
    from servecap.runtime.weights import load_decoder

    save_moe(transformers, model_type, tmp_path)
    spec = load_model(str(tmp_path)).spec
    prompts = [[(5 * i + j) % 256 for j in range(3 + 30 * i)] for i in range(4)]
    outputs = []
    for device in ("cpu", "cuda"):
        model = load_decoder(spec, tmp_path, "fp32", device)
        engine = Engine(model, KVPool(spec, 64, 4, "fp32", device),
                        EngineConfig(max_num_batched_tokens=40))
        records = [engine.add_request(p, 8) for p in prompts]
        while engine.has_unfinished():
            engine.step()
        outputs.append([r.output_token_ids for r in records])
    assert outputs[0] == outputs[1]


def test_cuda_grouped_matmul_agrees_with_the_per_expert_loop(monkeypatch) -> None:
    """bf16 on CUDA takes torch's grouped_mm where the device has it (sm80+); the per-expert
    matmuls give the same rows within bf16's rounding."""
    from dataclasses import replace

    from servecap.model_configs import load_model
    from servecap.runtime import moe
    from servecap.runtime.router import Routing, route

    spec = load_model("qwen3-30b-a3b").spec
    spec = replace(spec, hidden_size=256, moe=replace(spec.moe, expert_intermediate_size=128))
    experts = moe.Experts(spec, moe.MoEOptions()).to("cuda", torch.bfloat16)
    experts.requires_grad_(False)
    generator = torch.Generator(device="cuda").manual_seed(0)
    for p in experts.parameters():
        p.copy_(torch.randn(p.shape, generator=generator, device="cuda") * 0.05)
    x = torch.randn(300, 256, generator=generator, device="cuda").bfloat16()
    weights, ids = route(torch.randn(300, 128, generator=generator, device="cuda"), Routing(), 8)
    grouped = experts(x, weights, ids).float()
    monkeypatch.setattr(moe, "grouped_mm_serves", lambda *args: False)
    looped = experts(x, weights, ids).float()
    assert torch.allclose(grouped, looped, rtol=0.02, atol=0.02)
