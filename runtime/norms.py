"""RMSNorm as each family computes it: Llama's (weight x in the input dtype), Qwen3-Next's
zero-centred one, Nemotron-H's and gpt-oss's (the weight multiplies in fp32)."""

import torch
from torch import nn

from servecap.ledger.model import ModelSpec


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w, computed in fp32 as Llama does."""

    unit_weight = 1.0  # the weight a seeded random model starts from

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        out = x32.to(x.dtype)
        out *= self.weight  # in place: w * x as transformers computes it, one temporary fewer
        return out


class OffsetRMSNorm(RMSNorm):
    """Qwen3-Next's zero-centred RMSNorm: (x / rms(x)) * (1 + w) in fp32, then the input dtype."""

    unit_weight = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * (1.0 + self.weight.float())).to(x.dtype)


class Fp32RMSNorm(RMSNorm):
    """Nemotron-H's RMSNorm: the weight multiplies in fp32, then the input dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * x32).to(x.dtype)


NORMS = {"qwen3_next": OffsetRMSNorm, "nemotron_h": Fp32RMSNorm, "gpt_oss": Fp32RMSNorm}


def norm_class(spec: ModelSpec) -> type[RMSNorm]:
    return NORMS.get(spec.model_type, RMSNorm)
