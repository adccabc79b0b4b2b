"""A checkpoint's expert tensors in the runtime's stacked layout (moe.Experts): gate_up_proj
(E, 2I, H) with the gate's rows first, down_proj (E, H, I), gpt-oss's biases (E, 2I), (E, H).

Checkpoints store experts one module each (Mixtral: experts.N.w1 gate, w3 up, w2 down; Qwen,
DeepSeek: experts.N.gate_proj, up_proj, down_proj), or, gpt-oss, stacked transposed with the
gate and up columns interleaved (gate_up_proj (E, H, 2I): gate = [..., ::2], up = [..., 1::2],
transformers' GptOssExperts). A checkpoint already in the stacked layout (transformers'
in-memory MixtralExperts form) is taken as it is.
"""

import torch

from servecap.ledger.arch import routed_layers
from servecap.ledger.model import ModelSpec

# model_type -> per-expert module names of (gate, up, down)
PER_EXPERT = {"mixtral": ("w1", "w3", "w2")}
GATE_UP_DOWN = ("gate_proj", "up_proj", "down_proj")


def fold_experts(spec: ModelSpec, state: dict[str, torch.Tensor], body: str, ffn: str
                 ) -> dict[str, torch.Tensor]:
    """`state` with each routed layer's expert tensors in the stacked layout; tensors that do
    not form a whole layer's experts are left for the name check to report."""
    for layer in routed_layers(spec):
        prefix = f"{body}.layers.{layer}.{ffn}.experts."
        if spec.model_type == "gpt_oss":
            _unweave(state, prefix)
        else:
            _stack(state, prefix, spec.moe.num_experts,
                   PER_EXPERT.get(spec.model_type, GATE_UP_DOWN))
    return state


def _stack(state: dict, prefix: str, num_experts: int, names: tuple[str, str, str]) -> None:
    gate, up, down = ([f"{prefix}{e}.{name}.weight" for e in range(num_experts)]
                      for name in names)
    if not all(key in state for key in gate + up + down):
        return
    state[f"{prefix}gate_up_proj"] = torch.stack(
        [torch.cat((state.pop(g), state.pop(u))) for g, u in zip(gate, up, strict=True)])
    state[f"{prefix}down_proj"] = torch.stack([state.pop(d) for d in down])


def _unweave(state: dict, prefix: str) -> None:
    """gpt-oss: (E, H, 2I) interleaved -> (E, 2I, H) gate rows then up rows; (E, I, H) ->
    (E, H, I); the gate/up bias de-interleaved the same way."""
    key = f"{prefix}gate_up_proj"
    if key not in state or f"{prefix}down_proj" not in state:
        return
    w = state[key].transpose(1, 2)
    state[key] = torch.cat((w[:, 0::2], w[:, 1::2]), dim=1).contiguous()
    state[f"{prefix}down_proj"] = state[f"{prefix}down_proj"].transpose(1, 2).contiguous()
    bias = f"{prefix}gate_up_proj_bias"
    if bias in state:
        b = state[bias]
        state[bias] = torch.cat((b[:, 0::2], b[:, 1::2]), dim=1)
