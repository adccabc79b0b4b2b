"""Tiny models for runtime tests: 2 layers, hidden 64, fp32 on the CPU."""

import pytest
import torch

from servecap.ledger.model import (
    FULL,
    LINEAR,
    MAMBA,
    NONE,
    SLIDING,
    Attention,
    ModelSpec,
    StateShape,
)
from servecap.runtime.attention import DenseKV
from servecap.runtime.model import Decoder
from servecap.runtime.weights import random_decoder


def make_spec(model_type: str = "llama", **attention) -> ModelSpec:
    extra = {"qwen2": {"qkv_bias": True}, "qwen3": {"qk_norm": True},
             "mistral": {"sliding_window_tokens": 8, "layer_kinds": (SLIDING, SLIDING)}}
    att = Attention("gqa", 4, 2, 16, **{**extra.get(model_type, {}), **attention})
    return ModelSpec(name=f"tiny-{model_type}", source="test", num_layers=2, attention=att,
                     hidden_size=64, intermediate_size=128, vocab_size=256,
                     model_type=model_type)


def hybrid_spec(model_type: str, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
                head_dim: int = 16, state_heads: int = 4, dims: tuple[int, int] = (16, 16),
                groups: int = 2, inter: int = 128, vocab: int = 256,
                kernel: int = 4) -> ModelSpec:
    """A Nemotron-H (Mamba-2, attention, MLP, Mamba-2, MLP blocks) or Qwen3-Next (gated
    DeltaNet and gated attention alternating) shape; dims: the recurrent state's two dims
    (Mamba-2 head_dim, d_state; DeltaNet v dim, k dim); groups: Mamba-2's B/C groups or
    DeltaNet's k heads."""
    a, b = dims
    if model_type == "nemotron_h":
        kinds = (MAMBA, FULL, NONE, MAMBA, NONE)
        state = StateShape(MAMBA, state_heads * a + 2 * groups * b, kernel, state_heads, dims,
                           "fp32", "fp32", groups, b, state_heads * a)
        att = Attention("gqa", heads, kv_heads, head_dim, layer_kinds=kinds)
        extra = dict(mlp_layers=(2, 4), gated_mlp=False, norms_per_layer=1)
    else:
        kinds = (LINEAR, FULL, LINEAR, FULL)
        state = StateShape(LINEAR, 2 * groups * b + state_heads * a, kernel, state_heads, dims,
                           "fp32", "fp32")
        att = Attention("gqa", heads, kv_heads, head_dim, qk_norm=True, q_gate=True,
                        layer_kinds=kinds)
        extra = {}
    return ModelSpec(name=f"tiny-{model_type}", source="test", num_layers=len(kinds),
                     attention=att, hidden_size=hidden, intermediate_size=inter,
                     vocab_size=vocab, model_type=model_type, state=state, **extra)


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

