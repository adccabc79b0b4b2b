"""The runtime's LoRA slots: the ledger's bytes as real tensors, applied in the forward pass,
and measured by verify."""

import pytest
import torch

from servecap.ledger.kv import Shard
from servecap.ledger.lora import LoraSpec, lora_bytes
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import MiB
from servecap.runtime.attention_reference import DenseKV
from servecap.runtime.lora import attach_lora
from servecap.runtime.weights import random_decoder
from servecap.scenario.spec import Load, Lora, Model, Runtime, Scenario, Scheduler
from servecap.scenario.verification import verify

LINEAR = ("q_proj", "o_proj", "gate_proj", "down_proj")  # every slice, no embedding or head


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize(("dtype", "bits"), [("fp32", 32), ("bf16", 16)])
def test_slot_tensors_are_the_ledger_line(model_type, dtype, bits, tiny_spec):
    spec = tiny_spec(model_type)
    lora = LoraSpec(max_loras=3, max_lora_rank=8, dtype=dtype)
    slots = attach_lora(random_decoder(spec, dtype), lora)
    serve = ServeSpec(device_bytes=64 * MiB, context_tokens=64, concurrency=1,
                      weight_dtype=dtype, activation_dtype=dtype, lora=lora)
    assert slots.tensor_bytes == lora_bytes(spec, lora, Shard(1), bits).device_bytes
    assert slots.tensor_bytes == build_plan(spec, serve).line("lora_adapters") > 0


def _logits(model, ids):
    kv = DenseKV(model.spec.num_layers, 1, len(ids), 2, 16, model.dtype, model.device)
    kv.set_rows([(0, 0, len(ids))])
    with torch.inference_mode():
        hidden = model(torch.tensor(ids), torch.arange(len(ids)), kv)
        return model.logits(hidden)


def test_an_adapter_in_a_slot_is_its_merged_weights(tiny_spec):
    """W x + B (A x) on every projection equals (W + B A) x: the hooks apply the slot."""
    spec, ids = tiny_spec(), [3, 17, 42, 9, 200]
    model = random_decoder(spec, "fp32", seed=1)
    base = _logits(model, ids)
    slots = attach_lora(model, LoraSpec(max_loras=2, max_lora_rank=8, dtype="fp32",
                                        target_modules=LINEAR))
    assert torch.equal(_logits(model, ids), base)  # empty slots: zeros, the base model
    slots.fill(seed=7, scale=0.1)
    slots.active = 1
    adapted = _logits(model, ids)
    merged = random_decoder(spec, "fp32", seed=1)
    with torch.no_grad():
        for i, layer in enumerate(merged.model.layers):
            for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj"):
                parent = layer.self_attn if name[0] in "qkvo" else layer.mlp
                a, b = slots.pair(f"{i}_{name}")
                getattr(parent, name).weight += b @ a
    assert not torch.allclose(adapted, base, atol=1e-3)
    torch.testing.assert_close(adapted, _logits(merged, ids), rtol=1e-4, atol=1e-4)
    slots.active = None
    assert torch.equal(_logits(model, ids), base)


def test_embedding_and_lm_head_slots_change_the_logits(tiny_spec):
    model = random_decoder(tiny_spec(), "fp32", seed=1)
    base = _logits(model, [5, 6, 7])
    slots = attach_lora(model, LoraSpec(max_loras=1, max_lora_rank=8, dtype="fp32",
                                        target_modules=("embed_tokens", "lm_head")))
    assert {name.split("_", 1)[1] for name, _ in slots.named_buffers()} == \
        {"embed_tokens", "lm_head"}
    slots.fill(seed=3, scale=0.1)
    assert not torch.allclose(_logits(model, [5, 6, 7]), base, atol=1e-3)


def test_verify_measures_the_lora_line_on_the_cpu():
    """tiny-llama with two rank-8 slots: the LoRA line measured exactly, nothing violated."""
    scenario = Scenario(model=Model("tiny-llama"),
                        lora=Lora(enable_lora=True, max_loras=2, max_lora_rank=8),
                        load=Load(concurrency=1), scheduler=Scheduler(max_model_len=64),
                        runtime=Runtime(output_tokens=4, probe=False))
    result = verify(scenario).binding
    line = next(c for c in result.reconciliation.lines if c.line == "lora_adapters")
    assert line.verdict == "ok" and line.measured_bytes == line.predicted_bytes > 0
    assert result.reconciliation.violations == ()
