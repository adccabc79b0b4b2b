"""A Llama-family decoder built from a ModelSpec: RMSNorm, RoPE, GQA, gated MLP, Qwen extras.

Module names follow Hugging Face checkpoints (model.layers.0.self_attn.q_proj.weight, ...) so a
local safetensors directory loads with a strict state dict. Attention itself is delegated to a
KV backend (attention.py): the paged pool in the engine, a contiguous cache as the reference.
"""

from dataclasses import dataclass, replace
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from servecap.ledger.errors import SpecError
from servecap.ledger.model import SLIDING, ModelSpec

from .parallel import (
    SINGLE,
    TensorParallel,
    all_gather_last,
    all_reduce,
    check_split,
    heads,
    vocab_rows,
)
from .rope import Rope, apply_rope

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
INIT_STD = 0.02  # seeded random weights: the usual transformer init scale


@dataclass(frozen=True)
class DecoderOptions:
    """Numerics the ledger does not need but the forward pass does (config.json values)."""

    rope: Rope = Rope()
    rms_norm_eps: float = 1e-6


DEFAULT_OPTIONS = DecoderOptions()


class KVBackend(Protocol):
    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               window_tokens: int | None) -> torch.Tensor: ...


def check_buildable(spec: ModelSpec) -> None:
    """Fail closed on what this runtime cannot build rather than approximating it."""
    if not spec.has_architecture:
        raise SpecError("model", spec.name, "the runtime needs the full architecture "
                        "(hidden_size, intermediate_size, vocab_size, model_type)")
    _refuse_hybrid_kinds(spec)
    if spec.attention.kind == "mla":
        raise SpecError("attention", "mla", "the runtime builds GQA/MHA/MQA attention only")
    if spec.moe is not None:
        raise SpecError("moe", spec.moe.num_experts, "the runtime builds dense MLPs only")
    if spec.quant is not None:
        raise SpecError("quantization", spec.quant.method, "the runtime runs unquantized "
                        "weights only (fp32, bf16, fp16)")
    if spec.model_type not in SUPPORTED_MODEL_TYPES or spec.attention.sinks:
        raise SpecError("model_type", spec.model_type,
                        "the runtime builds: " + ", ".join(SUPPORTED_MODEL_TYPES))


# each kind the ledger plans and the runtime does not run yet, with the reason named
UNRUN_KINDS = {
    "linear": "gated-DeltaNet linear attention (a fixed state per request; docs/hybrid.md "
              "gives vLLM's state layout)",
    "mamba": "Mamba-2 state-space layers (a fixed state per request; docs/hybrid.md)",
    "chunked": "chunked local attention (Llama-4)",
    "none": "cache-free MLP/MoE blocks of a hybrid (Nemotron-H)",
}


def _refuse_hybrid_kinds(spec: ModelSpec) -> None:
    """Nothing runs wrong silently: each kind the runtime cannot run is refused by name."""
    for kind in dict.fromkeys(spec.attention.layer_kinds):
        if kind in UNRUN_KINDS:
            raise SpecError("layer kind", kind, "the runtime does not run "
                            f"{UNRUN_KINDS[kind]} yet; plan it with servecap plan")
    if spec.parallel_state:
        raise SpecError("layer kind", "attention + mamba", f"the runtime does not run "
                        f"{UNRUN_KINDS['mamba']} beside attention (Falcon-H1) yet")
    att = spec.attention
    if att.indexer_head_dim:
        raise SpecError("index_head_dim", att.indexer_head_dim, "the runtime does not run the "
                        "sparse-attention indexer (DeepSeek-V3.2, GLM-5) yet")
    if att.full_head_dim and att.full_head_dim != att.head_dim:
        raise SpecError("global_head_dim", att.full_head_dim, "the runtime does not run "
                        "per-layer-type head sizes (Gemma-4) yet")
    if att.q_gate:
        raise SpecError("attn_output_gate", True, "the runtime does not run gated attention "
                        "output (Qwen3-Next, Qwen3.5) yet")


def with_num_layers(spec: ModelSpec, num_layers: int) -> ModelSpec:
    """A scaled-down copy with the first `num_layers` layers; plan it with the ledger as usual
    so weights and KV scale the same way. A stated parameter count no longer applies."""
    if not 1 <= num_layers <= spec.num_layers:
        raise SpecError("num_layers", num_layers, f"between 1 and {spec.num_layers}")
    kinds = spec.attention.layer_kinds[:num_layers]
    return replace(spec, num_layers=num_layers, num_parameters=None,
                   attention=replace(spec.attention, layer_kinds=kinds),
                   name=f"{spec.name} ({num_layers} layers)")


def torch_dtype(name: str, field: str = "weight_dtype") -> torch.dtype:
    if name not in TORCH_DTYPES:
        raise SpecError(field, name, "the runtime supports: " + ", ".join(TORCH_DTYPES))
    return TORCH_DTYPES[name]


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * w, computed in fp32 as Llama does."""

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


class SelfAttention(nn.Module):
    """This rank's heads: q/k/v split by head, o_proj by input column, outputs summed."""

    def __init__(self, spec: ModelSpec, layer: int, opts: DecoderOptions,
                 tp: TensorParallel) -> None:
        super().__init__()
        att, h = spec.attention, spec.hidden_size
        self.layer, self.tp = layer, tp
        self.num_heads, _, self.num_kv_heads = heads(spec, tp)
        self.head_dim = att.head_dim
        self.window = att.sliding_window_tokens if spec.layer_kind(layer) == SLIDING else None
        self.q_proj = nn.Linear(h, self.num_heads * att.head_dim, bias=att.qkv_bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * att.head_dim, bias=att.qkv_bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * att.head_dim, bias=att.qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * att.head_dim, h, bias=False)
        if att.qk_norm:
            self.q_norm = RMSNorm(att.head_dim, opts.rms_norm_eps)
            self.k_norm = RMSNorm(att.head_dim, opts.rms_norm_eps)

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                kv: KVBackend) -> torch.Tensor:
        tokens = x.shape[0]
        q = self.q_proj(x).view(tokens, self.num_heads, self.head_dim)  # (T, H, D)
        k = self.k_proj(x).view(tokens, self.num_kv_heads, self.head_dim)  # (T, Hkv, D)
        v = self.v_proj(x).view(tokens, self.num_kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, *rotary), apply_rope(k, *rotary)
        out = kv.attend(self.layer, q, k, v, self.window)  # (T, H, D)
        return all_reduce(self.o_proj(out.reshape(tokens, -1)), self.tp)


class MLP(nn.Module):
    """SiLU-gated MLP; with tensor parallelism each rank holds inter / tp columns."""

    def __init__(self, hidden: int, inter: int, tp: TensorParallel) -> None:
        super().__init__()
        self.tp = tp
        self.gate_proj = nn.Linear(hidden, inter // tp.size, bias=False)
        self.up_proj = nn.Linear(hidden, inter // tp.size, bias=False)
        self.down_proj = nn.Linear(inter // tp.size, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = F.silu(self.gate_proj(x), inplace=True)  # (T, I/tp)
        gate *= self.up_proj(x)  # in place: two (T, I/tp) live at most
        return all_reduce(self.down_proj(gate), self.tp)


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec, layer: int, opts: DecoderOptions,
                 tp: TensorParallel) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, opts.rms_norm_eps)
        self.self_attn = SelfAttention(spec, layer, opts, tp)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, opts.rms_norm_eps)
        self.mlp = MLP(spec.hidden_size, spec.intermediate_size, tp)

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                kv: KVBackend) -> torch.Tensor:
        """Adds both sublayers into the residual stream x in place: one (T, H) stream for the
        whole pass rather than a new one per sublayer."""
        x += self.self_attn(self.input_layernorm(x), rotary, kv)
        x += self.mlp(self.post_attention_layernorm(x))
        return x


class Body(nn.Module):
    def __init__(self, spec: ModelSpec, opts: DecoderOptions, tp: TensorParallel) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_rows(spec, tp)[1], spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec, i, opts, tp)
                                    for i in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, opts.rms_norm_eps)


class Decoder(nn.Module):
    """forward(input_ids (T,), positions (T,), kv) -> hidden (T, H); logits() -> (R, V) fp32.
    seq_lens (T,): each token's sequence length this step, for the RoPE types that depend on
    it (dynamic, longrope); by default the step's furthest position + 1, as transformers does."""

    def __init__(self, spec: ModelSpec, opts: DecoderOptions = DEFAULT_OPTIONS,
                 tp: TensorParallel = SINGLE) -> None:
        super().__init__()
        check_buildable(spec)
        check_split(spec, tp)
        self.spec, self.options, self.tp = spec, opts, tp
        self.model = Body(spec, opts, tp)
        if not spec.tie_word_embeddings:
            self.lm_head = nn.Linear(spec.hidden_size, vocab_rows(spec, tp)[1], bias=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, kv: KVBackend,
                seq_lens: torch.Tensor | None = None) -> torch.Tensor:
        x = self._embed(input_ids)
        rotary = self.options.rope.cos_sin(positions, self.spec.attention.head_dim, x.dtype,
                                           seq_lens)  # (T, D) each, shared by every layer
        for layer in self.model.layers:
            layer(x, rotary, kv)  # updates x in place
        return self.model.norm(x)

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Vocabulary-parallel lookup: rows outside this rank's slice read 0, then a sum."""
        if self.tp.size == 1:
            return self.model.embed_tokens(input_ids)
        start, rows = vocab_rows(self.spec, self.tp)
        local = input_ids - start
        inside = (local >= 0) & (local < rows)
        x = self.model.embed_tokens(local.clamp(0, rows - 1)) * inside.unsqueeze(-1)
        return all_reduce(x, self.tp)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(R, H) -> (R, V) fp32; under tensor parallelism each rank's slice is gathered."""
        head = self.model.embed_tokens.weight if self.spec.tie_word_embeddings \
            else self.lm_head.weight
        local = (hidden @ head.T).float()
        return all_gather_last(local, self.tp)[:, :self.spec.vocab_size]

    @property
    def weight_bytes(self) -> int:
        """Bytes of every parameter tensor (tied embeddings counted once)."""
        return sum(p.numel() * p.element_size() for p in self.parameters())

    @property
    def dtype(self) -> torch.dtype:
        return self.model.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.embed_tokens.weight.device
