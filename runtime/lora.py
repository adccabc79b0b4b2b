"""LoRA adapter slots held on the device as vLLM holds them, and applied in the forward pass.

Every slice's shape comes from the ledger (servecap.ledger.lora.layer_slices, edge_slices):
max_loras slots of LoRA A and B at max_lora_rank, zeros until an adapter is loaded. A forward
hook adds (x A_s^T) B_s^T of the active slot to each wrapped projection; the embedding adds
B_s A_s[ids], the logits (h A_s^T) B_s^T, after the lookup's sum and the logits' gather, as
vLLM's VocabParallelEmbeddingWithLoRA and LogitsProcessorWithLoRA do. One slot serves every
token of a step (vLLM's punica kernels pick a slot per token; the bytes are the same)."""

import torch
from torch import nn

from servecap.ledger.errors import SpecError
from servecap.ledger.lora import LoraSpec, Slice, edge_slices, layer_slices
from servecap.ledger.model import ModelSpec

from .model import Decoder, torch_dtype
from .parallel import SINGLE, TensorParallel

_PARENT = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn",
           "o_proj": "self_attn", "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


class LoraSlots(nn.Module):
    """The slots of every wrapped module on this rank: a_<layer>_<module> (max_loras, A rows,
    A cols) and b_... (max_loras, B rows, B cols) buffers; `active` is the slot applied (None:
    no adapter, the base model alone)."""

    def __init__(self, spec: ModelSpec, lora: LoraSpec, tp: TensorParallel,
                 device: str | torch.device) -> None:
        super().__init__()
        if lora.fully_sharded:
            raise SpecError("--fully-sharded-loras", True, "planned only: the runtime holds "
                            "vLLM's default layout (A whole on column-parallel layers)")
        self.dtype = torch_dtype(lora.dtype, "--lora-dtype")
        self.active: int | None = 0
        self.layers = [layer_slices(spec, lora, tp.size)] * spec.num_layers
        self.edges = edge_slices(spec, lora, True, True)
        for i, slices in enumerate(self.layers):
            for item in slices:
                self._add(f"{i}_{item.module}", item, lora.max_loras, device)
        for item in self.edges:
            self._add(item.module, item, lora.max_loras, device)

    def _add(self, name: str, item: Slice, slots: int, device) -> None:
        for side, shape in (("a", (item.a_rows, item.a_cols)), ("b", (item.b_rows, item.b_cols))):
            self.register_buffer(f"{side}_{name}",
                                 torch.zeros(slots, *shape, dtype=self.dtype, device=device))

    @property
    def tensor_bytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers())

    def pair(self, name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The active slot's (A, B) of a module, None without an active slot."""
        if self.active is None:
            return None
        return getattr(self, f"a_{name}")[self.active], getattr(self, f"b_{name}")[self.active]

    def fill(self, seed: int, scale: float = 0.02) -> None:
        """Seeded random adapters in every slot (an adapter loaded into each)."""
        generator = torch.Generator(device=next(self.buffers()).device).manual_seed(seed)
        with torch.no_grad():
            for buffer in self.buffers():
                buffer.copy_(torch.randn(buffer.shape, generator=generator,
                                         device=buffer.device) * scale)


def attach_lora(model: Decoder, lora: LoraSpec, tp: TensorParallel = SINGLE) -> LoraSlots:
    """Allocate the slots on the model's device and wire them into its forward pass."""
    slots = LoraSlots(model.spec, lora, tp, model.device)
    for i, layer in enumerate(model.model.layers):
        for item in slots.layers[i]:
            module = getattr(getattr(layer, _PARENT[item.module]), item.module)
            module.register_forward_hook(_linear_hook(slots, f"{i}_{item.module}"))
    names = {item.module for item in slots.edges}
    if "embed_tokens" in names:
        model._embed = _embedding(model._embed, slots)
    if "lm_head" in names:
        model.logits = _logits(model.logits, slots)
    model.lora_slots = slots  # the module owns them: freed with the model
    return slots


def _delta(x: torch.Tensor, pair, out_dtype: torch.dtype) -> torch.Tensor:
    a, b = pair  # A (r, in), B (out, r)
    return ((x.to(a.dtype) @ a.T) @ b.T).to(out_dtype)  # (T, out)


def _linear_hook(slots: LoraSlots, name: str):
    def hook(module, inputs, output):
        pair = slots.pair(name)
        return output if pair is None else output + _delta(inputs[0], pair, output.dtype)
    return hook


def _embedding(embed, slots: LoraSlots):
    def lookup(input_ids: torch.Tensor) -> torch.Tensor:
        x = embed(input_ids)  # (T, H), summed across ranks
        pair = slots.pair("embed_tokens")
        if pair is None:
            return x
        a, b = pair  # A (vocab, r), B (H, r)
        return x + (a[input_ids] @ b.T).to(x.dtype)
    return lookup


def _logits(logits, slots: LoraSlots):
    def project(hidden: torch.Tensor) -> torch.Tensor:
        out = logits(hidden)  # (R, V) fp32, gathered
        pair = slots.pair("lm_head")
        if pair is None:
            return out
        return out + _delta(hidden, pair, torch.float32)[:, :out.shape[-1]]
    return project
