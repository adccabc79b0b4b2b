"""A decoder built from a ModelSpec: Llama-family layers (RMSNorm, RoPE, GQA, gated MLP, Qwen
extras) and the hybrids' (Qwen3-Next's gated DeltaNet and gated attention, Nemotron-H's Mamba-2,
attention and relu2 MLP blocks).

Module names follow Hugging Face checkpoints (model.layers.0.self_attn.q_proj.weight, ...) so a
local safetensors directory loads with a strict state dict. Attention itself is delegated to a
KV backend (attention.py): the paged pool in the engine, a contiguous cache as the reference.
"""

from dataclasses import dataclass, replace
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from servecap.ledger.arch import routed_layers
from servecap.ledger.errors import SpecError
from servecap.ledger.model import LINEAR, MAMBA, NONE, SLIDING, ModelSpec

from .buildable import SUPPORTED_MODEL_TYPES, UNRUN_KINDS, check_buildable  # noqa: F401
from .mixers import GatedDeltaNet, Mamba2Mixer
from .mla import LatentAttention
from .moe import MoEOptions, SparseMoE, family_options
from .norms import Fp32RMSNorm, norm_class
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
from .softmax import Softmax

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
INIT_STD = 0.02  # seeded random weights: the usual transformer init scale


@dataclass(frozen=True)
class DecoderOptions:
    """Numerics the ledger does not need but the forward pass does (config.json values)."""

    rope: Rope = Rope()
    rms_norm_eps: float = 1e-6
    rotary_fraction: float = 1.0  # partial_rotary_factor: Qwen3-Next rotates a quarter
    time_step_min: float = 1e-3  # Mamba-2's dt floor in prefill (NemotronH's time_step_min)
    moe: MoEOptions | None = None  # routing and expert activation; None: the family's defaults
    rope_interleave: bool = True  # MLA's rotated dims come in pairs (DeepSeek's rope_interleave)


DEFAULT_OPTIONS = DecoderOptions()


class KVBackend(Protocol):
    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None,
               window_tokens: int | None, softmax: Softmax = ...) -> torch.Tensor: ...


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


# families whose attention_bias also gives o_proj a bias (the ledger's inventory counts it)
O_PROJ_BIAS = ("gpt_oss",)


def uses_rope(spec: ModelSpec) -> bool:
    """Nemotron-H's attention layers take no positional embedding (its Mamba layers order)."""
    return spec.model_type != "nemotron_h"


def rotary_dim(spec: ModelSpec, opts: DecoderOptions) -> int:
    """Dims of a head that rotate: int(head_dim x partial_rotary_factor), as transformers;
    MLA rotates its qk_rope_head_dim dims."""
    if spec.attention.kind == "mla":
        return spec.attention.qk_rope_head_dim
    return int(spec.attention.head_dim * opts.rotary_fraction)


class SelfAttention(nn.Module):
    """This rank's heads: q/k/v split by head, o_proj by input column, outputs summed. Qwen3-Next
    adds an output gate (q_proj emits it beside q: sigmoid(gate) scales the output); gpt-oss
    a sink logit per head and a bias on o_proj."""

    def __init__(self, spec: ModelSpec, layer: int, opts: DecoderOptions,
                 tp: TensorParallel) -> None:
        super().__init__()
        att, h = spec.attention, spec.hidden_size
        self.layer, self.tp = layer, tp
        self.num_heads, _, self.num_kv_heads = heads(spec, tp)
        self.head_dim, self.gated = att.head_dim, att.q_gate
        self.rotary = rotary_dim(spec, opts) if uses_rope(spec) else 0
        self.window = att.sliding_window_tokens if spec.layer_kind(layer) == SLIDING else None
        q_rows = self.num_heads * att.head_dim * (2 if att.q_gate else 1)
        self.q_proj = nn.Linear(h, q_rows, bias=att.qkv_bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * att.head_dim, bias=att.qkv_bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * att.head_dim, bias=att.qkv_bias)
        o_bias = att.qkv_bias and spec.model_type in O_PROJ_BIAS
        self.o_proj = nn.Linear(self.num_heads * att.head_dim, h, bias=o_bias)
        if att.sinks:
            self.sinks = nn.Parameter(torch.empty(self.num_heads))
        if att.qk_norm:
            self.q_norm = norm_class(spec)(att.head_dim, opts.rms_norm_eps)
            self.k_norm = norm_class(spec)(att.head_dim, opts.rms_norm_eps)

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None,
                kv: KVBackend) -> torch.Tensor:
        tokens = x.shape[0]
        q = self.q_proj(x).view(tokens, self.num_heads, -1)  # (T, H, D), gated: (T, H, 2D)
        gate = None
        if self.gated:
            q, gate = q.chunk(2, dim=-1)
            gate = gate.reshape(tokens, -1)
        k = self.k_proj(x).view(tokens, self.num_kv_heads, self.head_dim)  # (T, Hkv, D)
        v = self.v_proj(x).view(tokens, self.num_kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary:
            q, k = _rotate(q, rotary, self.rotary), _rotate(k, rotary, self.rotary)
        softmax = Softmax(sinks=self.sinks) if hasattr(self, "sinks") else Softmax()
        out = kv.attend(self.layer, q, k, v, self.window, softmax).reshape(tokens, -1)
        if gate is not None:
            out = out * torch.sigmoid(gate)
        return row_parallel(self.o_proj, out, self.tp)


def row_parallel(linear: nn.Linear, x: torch.Tensor, tp: TensorParallel) -> torch.Tensor:
    """A row-parallel projection summed across ranks; every rank holds its bias, rank 0 adds
    it (vLLM's RowParallelLinear). The module itself runs, so its forward hooks (LoRA) do."""
    out = linear(x)
    if tp.rank > 0 and linear.bias is not None:
        out -= linear.bias
    return all_reduce(out, tp)


def _rotate(x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor], dims: int
            ) -> torch.Tensor:
    """RoPE over the first `dims` of each head (all of it for most models)."""
    if dims == x.shape[-1]:
        return apply_rope(x, *rotary)
    return torch.cat((apply_rope(x[..., :dims], *rotary), x[..., dims:]), dim=-1)


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


class Relu2MLP(nn.Module):
    """Nemotron-H's ungated MLP: down(relu(up(x))^2)."""

    def __init__(self, hidden: int, inter: int) -> None:
        super().__init__()
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = F.relu(self.up_proj(x), inplace=True)
        return self.down_proj(up.square_())


# model_type -> the feed-forward block's name in its checkpoints (else mlp)
FFN_NAMES = {"mixtral": "block_sparse_moe"}


class DecoderLayer(nn.Module):
    """Pre-norm token mixer then pre-norm feed-forward, each added into the residual stream:
    Llama's self_attn (DeepSeek's latent attention), or Qwen3-Next's linear_attn (gated
    DeltaNet) on its linear layers; a gated MLP, or on routed layers the MoE block."""

    def __init__(self, spec: ModelSpec, layer: int, opts: DecoderOptions,
                 tp: TensorParallel) -> None:
        super().__init__()
        norm = norm_class(spec)
        self.input_layernorm = norm(spec.hidden_size, opts.rms_norm_eps)
        if spec.layer_kind(layer) == LINEAR:
            self.linear_attn = GatedDeltaNet(spec, layer, opts.rms_norm_eps)
        elif spec.attention.kind == "mla":
            self.self_attn = LatentAttention(spec, layer, opts, tp, norm)
        else:
            self.self_attn = SelfAttention(spec, layer, opts, tp)
        self.post_attention_layernorm = norm(spec.hidden_size, opts.rms_norm_eps)
        self.ffn_name = FFN_NAMES.get(spec.model_type, "mlp")
        setattr(self, self.ffn_name, feed_forward(spec, layer, opts, tp))

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None,
                kv: KVBackend) -> torch.Tensor:
        """Adds both sublayers into the residual stream x in place: one (T, H) stream for the
        whole pass rather than a new one per sublayer."""
        h = self.input_layernorm(x)
        x += (self.linear_attn(h, kv.states) if hasattr(self, "linear_attn")
              else self.self_attn(h, rotary, kv))
        del h
        x += getattr(self, self.ffn_name)(self.post_attention_layernorm(x))
        return x


def feed_forward(spec: ModelSpec, layer: int, opts: DecoderOptions,
                 tp: TensorParallel) -> nn.Module:
    """The layer's MoE block where it routes to experts (ledger.arch.routed_layers: the
    first_k_dense_replace, decoder_sparse_step and mlp_only_layers rules), else its MLP."""
    if layer not in routed_layers(spec):
        return MLP(spec.hidden_size, spec.intermediate_size, tp)
    return SparseMoE(spec, opts.moe or family_options(spec.model_type),
                     lambda width: MLP(spec.hidden_size, width, tp), tp)


class NemotronBlock(nn.Module):
    """Nemotron-H's block: one pre-norm mixer (Mamba-2, attention or MLP) added into the stream."""

    def __init__(self, spec: ModelSpec, layer: int, opts: DecoderOptions,
                 tp: TensorParallel) -> None:
        super().__init__()
        self.norm = Fp32RMSNorm(spec.hidden_size, opts.rms_norm_eps)
        kind = spec.layer_kind(layer)
        self.kind = kind
        if kind == MAMBA:
            self.mixer = Mamba2Mixer(spec, layer, opts.rms_norm_eps, opts.time_step_min)
        elif kind == NONE:
            self.mixer = Relu2MLP(spec.hidden_size, spec.intermediate_size)
        else:
            self.mixer = SelfAttention(spec, layer, opts, tp)

    def forward(self, x: torch.Tensor, rotary, kv: KVBackend) -> torch.Tensor:
        h = self.norm(x)
        if self.kind == MAMBA:
            x += self.mixer(h, kv.states)
        elif self.kind == NONE:
            x += self.mixer(h)
        else:
            x += self.mixer(h, rotary, kv)
        return x


# model_type -> (layer class, body, embedding and final norm names) as the checkpoints name them
FAMILIES = {"nemotron_h": (NemotronBlock, "backbone", "embeddings", "norm_f")}
LLAMA_FAMILY = (DecoderLayer, "model", "embed_tokens", "norm")


class Body(nn.Module):
    def __init__(self, spec: ModelSpec, opts: DecoderOptions, tp: TensorParallel) -> None:
        super().__init__()
        layer, _, embed, norm = FAMILIES.get(spec.model_type, LLAMA_FAMILY)
        self.embed_name, self.norm_name = embed, norm
        setattr(self, embed, nn.Embedding(vocab_rows(spec, tp)[1], spec.hidden_size))
        self.layers = nn.ModuleList(layer(spec, i, opts, tp) for i in range(spec.num_layers))
        setattr(self, norm, norm_class(spec)(spec.hidden_size, opts.rms_norm_eps))

    @property
    def embed(self) -> nn.Embedding:
        return getattr(self, self.embed_name)

    @property
    def final_norm(self) -> nn.Module:
        return getattr(self, self.norm_name)


class Decoder(nn.Module):
    """forward(input_ids (T,), positions (T,), kv) -> hidden (T, H); logits() -> (R, V) fp32.
    seq_lens (T,): each token's sequence length this step, for the RoPE types that depend on
    it (dynamic, longrope); by default the step's furthest position + 1, as transformers does.
    Hybrids' state layers read and write their states through kv.states (state_pool.py)."""

    def __init__(self, spec: ModelSpec, opts: DecoderOptions = DEFAULT_OPTIONS,
                 tp: TensorParallel = SINGLE) -> None:
        super().__init__()
        check_buildable(spec)
        check_split(spec, tp)
        self.spec, self.options, self.tp = spec, opts, tp
        self.body_name = FAMILIES.get(spec.model_type, LLAMA_FAMILY)[1]
        self.add_module(self.body_name, Body(spec, opts, tp))
        if not spec.tie_word_embeddings:
            self.lm_head = nn.Linear(spec.hidden_size, vocab_rows(spec, tp)[1], bias=False)

    @property
    def model(self) -> Body:
        """The layers, embedding and final norm (checkpoints call it model, or backbone)."""
        body = self._modules.get(self.body_name)
        if body is None:
            raise AttributeError("model")  # during __init__, before the body is added
        return body

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, kv: KVBackend,
                seq_lens: torch.Tensor | None = None) -> torch.Tensor:
        x = self._embed(input_ids)
        rotary = None
        if uses_rope(self.spec):  # (T, D) each, shared by every layer
            rotary = self.options.rope.cos_sin(positions, rotary_dim(self.spec, self.options),
                                               x.dtype, seq_lens)
        for layer in self.model.layers:
            layer(x, rotary, kv)  # updates x in place
        return self.model.final_norm(x)

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Vocabulary-parallel lookup: rows outside this rank's slice read 0, then a sum."""
        if self.tp.size == 1:
            return self.model.embed(input_ids)
        start, rows = vocab_rows(self.spec, self.tp)
        local = input_ids - start
        inside = (local >= 0) & (local < rows)
        x = self.model.embed(local.clamp(0, rows - 1)) * inside.unsqueeze(-1)
        return all_reduce(x, self.tp)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(R, H) -> (R, V) fp32; under tensor parallelism each rank's slice is gathered."""
        head = self.model.embed.weight if self.spec.tie_word_embeddings \
            else self.lm_head.weight
        local = (hidden @ head.T).float()
        return all_gather_last(local, self.tp)[:, :self.spec.vocab_size]

    @property
    def weight_bytes(self) -> int:
        """Bytes of every parameter tensor (tied embeddings counted once)."""
        return sum(p.numel() * p.element_size() for p in self.parameters())

    @property
    def dtype(self) -> torch.dtype:
        return self.model.embed.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.embed.weight.device
