"""Rotary position embedding as a checkpoint's config.json states it: both config formats, the
RoPE types Llama-family checkpoints use, and a refusal for anything else that changes the math.

Formulas follow Hugging Face transformers' modeling_rope_utils (the reference the runtime is
tested against): inv_freq_i = 1 / theta^(2i/d), reshaped per rope_type; cos/sin are scaled by the
type's attention factor (yarn, longrope) and applied rotate-half style.
"""

import math
from dataclasses import dataclass, field

import torch

from servecap.ledger.errors import SpecError

DEFAULT_THETA = 10000.0  # transformers' default for llama, mistral, qwen2, qwen3
# keys each rope_type reads; any other key could change the math and is refused by name
KEYS = {
    "default": set(),
    "linear": {"factor"},
    "dynamic": {"factor"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
             "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    "longrope": {"short_factor", "long_factor", "factor", "original_max_position_embeddings",
                 "attention_factor"},
}
REQUIRED = {"linear": {"factor"}, "dynamic": {"factor"},
            "llama3": {"factor", "low_freq_factor", "high_freq_factor"},
            "yarn": {"factor"}, "longrope": {"short_factor", "long_factor"}}
COMMON = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
ALIASES = {"su": "longrope"}  # Phi-3's first configs named longrope "su"


@dataclass(frozen=True)
class Rope:
    """One model's RoPE: rope_type, theta and the type's parameters (see KEYS)."""

    rope_type: str = "default"
    theta: float = DEFAULT_THETA
    max_position_embeddings: int = 0
    params: dict = field(default_factory=dict)

    def inv_freq(self, head_dim: int, seq_lens: torch.Tensor | None = None,
                 device: torch.device | str = "cpu") -> tuple[torch.Tensor, float]:
        """(inv_freq, attention_factor): inv_freq is (D/2,), or (T, D/2) for the types that depend
        on each token's sequence length (dynamic, longrope; seq_lens: (T,))."""
        ramp = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim
        base = 1.0 / (self.theta ** ramp)
        kind, p = self.rope_type, self.params
        if kind == "default":
            return base, 1.0
        if kind == "linear":
            return base / p["factor"], 1.0
        if kind == "llama3":
            return _llama3(base, p), 1.0
        if kind == "yarn":
            return _yarn(self.theta, head_dim, p, self.max_position_embeddings, device)
        if kind == "dynamic":
            return _dynamic(self.theta, head_dim, p["factor"], self.max_position_embeddings,
                            seq_lens, ramp), 1.0
        return _longrope(self.theta, ramp, p, self.max_position_embeddings, seq_lens)

    def cos_sin(self, positions: torch.Tensor, head_dim: int, dtype: torch.dtype,
                seq_lens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (T, D) in `dtype` for positions (T,), as transformers builds them."""
        if seq_lens is None:
            seq_lens = (positions.max() + 1).expand(positions.shape)
        inv_freq, scale = self.inv_freq(head_dim, seq_lens, positions.device)
        freqs = positions[:, None].float() * inv_freq  # (T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin. x: (T, heads, D); cos/sin: (T, D)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    rotated *= sin[:, None, :]
    out = x * cos[:, None, :]
    out += rotated  # the same sums as x * cos + rotated * sin, one temporary fewer
    return out


def _llama3(inv_freq: torch.Tensor, p: dict) -> torch.Tensor:
    """Llama 3.1: long wavelengths / factor, short ones kept, a smooth blend between."""
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old = p["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, blended, scaled)


def _yarn(theta: float, dim: int, p: dict, max_pos: int,
          device: torch.device | str) -> tuple[torch.Tensor, float]:
    """YaRN: interpolate low frequencies by factor, keep high ones, ramp between; cos/sin x
    0.1 ln(factor) + 1 unless attention_factor (or mscale/mscale_all_dim) says otherwise."""
    old = p["original_max_position_embeddings"]
    factor = p["factor"] if p.get("factor") is not None else max_pos / old
    attention = p.get("attention_factor")
    if attention is None:
        mscale, mscale_all = p.get("mscale"), p.get("mscale_all_dim")
        attention = (_mscale(factor, mscale) / _mscale(factor, mscale_all)
                     if mscale and mscale_all else _mscale(factor))
    beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

    def correction(rotations: float) -> float:
        return dim * math.log(old / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction(beta_fast), correction(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    extrapolate = 1 - ramp.to(device)
    pos_freqs = theta ** (torch.arange(0, dim, 2, device=device).float() / dim)
    inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolate) + (1.0 / pos_freqs) * extrapolate
    return inv, float(attention)


def _mscale(scale: float, mscale: float = 1) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _dynamic(theta: float, dim: int, factor: float, max_pos: int, seq_lens: torch.Tensor,
             ramp: torch.Tensor) -> torch.Tensor:
    """Dynamic NTK: theta grows once a sequence passes max_position_embeddings,
    theta x (factor x L / max_pos - (factor - 1))^(d / (d - 2)), L = the sequence's length."""
    length = seq_lens.clamp(min=max_pos).double()
    base = theta * ((factor * length / max_pos) - (factor - 1)) ** (dim / (dim - 2))  # (T,)
    return 1.0 / (base.float()[:, None] ** ramp[None, :])


def _longrope(theta: float, ramp: torch.Tensor, p: dict, max_pos: int,
              seq_lens: torch.Tensor) -> tuple[torch.Tensor, float]:
    """LongRoPE (Phi-3): per-frequency factors, long ones once a sequence passes the original
    length; cos/sin x sqrt(1 + ln(factor) / ln(original)) with factor = max_pos / original."""
    old = p["original_max_position_embeddings"]
    factor = p["factor"] if p.get("factor") is not None else max_pos / old
    attention = p.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(old))
    short = torch.tensor(p["short_factor"], dtype=torch.float32, device=ramp.device)
    long = torch.tensor(p["long_factor"], dtype=torch.float32, device=ramp.device)
    base = theta ** ramp  # (D/2,)
    inv_short, inv_long = 1.0 / (short * base), 1.0 / (long * base)
    return torch.where((seq_lens > old)[:, None], inv_long, inv_short), float(attention)


def rope_from_config(config: dict, where: str = "config.json") -> Rope:
    """Rope from `rope_parameters` (current transformers) or top-level `rope_theta` +
    `rope_scaling` (older checkpoints); an unknown type or key is a SpecError naming it."""
    field_name = "rope_parameters" if config.get("rope_parameters") else "rope_scaling"
    params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if any(isinstance(v, dict) for v in params.values()):
        raise SpecError(field_name, sorted(params), "per-layer-type RoPE is not implemented "
                        "by the runtime").at(where)
    kind = params.get("rope_type", params.get("type", "default"))
    kind = ALIASES.get(kind, kind)
    if kind not in KEYS:
        raise SpecError(f"{field_name}.rope_type", kind, "the runtime implements: "
                        + ", ".join(KEYS)).at(where)
    _check_keys(params, kind, field_name, where)
    partial = params.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    if partial not in (None, 1, 1.0):
        raise SpecError("partial_rotary_factor", partial, "the runtime rotates the whole "
                        "head (1.0) only").at(where)
    theta = params.get("rope_theta", config.get("rope_theta")) or DEFAULT_THETA
    max_pos = int(config.get("max_position_embeddings") or 0)
    values = {k: params[k] for k in KEYS[kind] if k in params}
    if kind in ("llama3", "yarn", "longrope"):
        values["original_max_position_embeddings"] = int(
            config.get("original_max_position_embeddings")
            or params.get("original_max_position_embeddings") or max_pos)
    if kind in ("dynamic", "yarn", "longrope") and not max_pos and not values.get("factor"):
        raise SpecError("max_position_embeddings", None, f"rope_type {kind} needs it").at(where)
    return Rope(kind, float(theta), max_pos, values)


def _check_keys(params: dict, kind: str, field_name: str, where: str) -> None:
    unknown = sorted(set(params) - KEYS[kind] - COMMON)
    if unknown:
        raise SpecError(f"{field_name}.{unknown[0]}", params[unknown[0]],
                        f"not implemented for rope_type {kind} by the runtime (it reads: "
                        + ", ".join(sorted(KEYS[kind] | {"rope_theta"})) + ")").at(where)
    missing = sorted(REQUIRED.get(kind, set()) - set(params))
    if missing:
        raise SpecError(f"{field_name}.{missing[0]}", None,
                        f"required for rope_type {kind}").at(where)
