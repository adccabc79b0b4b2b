"""Tiny models for runtime tests: 2 layers, hidden 64, fp32 on the CPU."""

import pytest
import torch

from servecap.ledger.model import (
    SLIDING,
    Attention,
    ModelSpec,
)
from servecap.runtime.attention_reference import DenseKV
from servecap.runtime.model import Decoder
from servecap.runtime.weights import random_decoder


def make_spec(model_type: str = "llama", **attention) -> ModelSpec:
    extra = {"qwen2": {"qkv_bias": True}, "qwen3": {"qk_norm": True},
             "mistral": {"sliding_window_tokens": 8, "layer_kinds": (SLIDING, SLIDING)}}
    att = Attention("gqa", 4, 2, 16, **{**extra.get(model_type, {}), **attention})
    return ModelSpec(name=f"tiny-{model_type}", source="test", num_layers=2, attention=att,
                     hidden_size=64, intermediate_size=128, vocab_size=256,
                     model_type=model_type)


@pytest.fixture(scope="session")
def tiny_spec():
    """make_spec(model_type, **attention): llama, qwen2 (q/k/v bias), qwen3 (q/k norms),
    mistral (8-token sliding window)."""
    return make_spec


@pytest.fixture(scope="session")
def tiny_model() -> Decoder:
    return random_decoder(make_spec(), "fp32", seed=1)


@pytest.fixture(scope="session")
def dense_greedy():
    return generate_dense


@torch.inference_mode()
def generate_dense(model: Decoder, prompt: list[int], num_output: int) -> list[int]:
    """Reference generation: one contiguous cache, whole prompt, then one token at a time."""
    att = model.spec.attention
    dev = model.device
    kv = DenseKV(model.spec.num_layers, 1, len(prompt) + num_output, att.num_kv_heads,
                 att.head_dim, model.dtype, dev)
    kv.set_rows([(0, 0, len(prompt))])
    hidden = model(torch.tensor(prompt, device=dev), torch.arange(len(prompt), device=dev), kv)
    out = [int(model.logits(hidden[-1:]).argmax())]
    while len(out) < num_output:
        pos = len(prompt) + len(out) - 1
        kv.set_rows([(0, pos, 1)])
        hidden = model(torch.tensor(out[-1:], device=dev), torch.tensor([pos], device=dev), kv)
        out.append(int(model.logits(hidden).argmax()))
    return out

