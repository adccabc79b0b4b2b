"""Phi-1 and Phi-2 (model_type phi) as vLLM's PhiForCausalLM builds them
(vllm/model_executor/models/phi.py at v0.21.0): each PhiLayer has one LayerNorm (weight and
bias) feeding attention and the MLP side by side; PhiAttention's q/k/v (QKVParallelLinear
bias=True) and its dense output projection carry biases and rotate head_dim x
partial_rotary_factor dims; PhiMLP is fc1 -> gelu_new -> fc2, both with biases, n_inner wide
(4 x hidden_size when the config states no n_inner); a final LayerNorm; an untied lm_head
with a bias (ParallelLMHead bias=True)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec

if TYPE_CHECKING:  # a bundled YAML is read without the pydantic models (bundled.py)
    from .schema import HFConfig

PHI_INNER_PER_HIDDEN = 4  # PhiMLP's n_inner when the config states none


def phi_block(cfg: HFConfig, spec: ModelSpec) -> ModelSpec:
    """The Phi spec: biases on every projection, LayerNorms, one norm a layer, an ungated MLP
    of vLLM's width."""
    if cfg.qk_layernorm:
        raise SpecError("qk_layernorm", cfg.qk_layernorm, "false: vLLM's PhiForCausalLM builds "
                        "no q/k LayerNorm")
    width = cfg.n_inner or PHI_INNER_PER_HIDDEN * spec.hidden_size
    notes = () if width == cfg.intermediate_size else (
        f"MLP width {width:,} as vLLM's PhiMLP builds it (n_inner, else 4 x hidden_size), not "
        f"intermediate_size {cfg.intermediate_size}",)
    return replace(spec, attention=replace(spec.attention, qkv_bias=True), norms_per_layer=1,
                   gated_mlp=False, intermediate_size=width, norm_bias=True, mlp_bias=True,
                   lm_head_bias=True, notes=spec.notes + notes)
