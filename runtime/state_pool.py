"""The state pool: the fixed per-request state of linear-attention and Mamba-2 layers, one page
per request in every state layer, allocated once and sized by the ledger.

Laid out as the ledger's state line says (ledger/state.py, vLLM's "SD" layout): for each state
layer a conv page (kernel - 1, conv_dim) in the conv dtype and a recurrent page (heads, a, b)
in the recurrent dtype. A request holds one slot, the same index in every layer's pages, from
admission until it finishes or is preempted; one extra null slot takes the writes of padded
rows and of the profile step, as the KV pool's null block does.
"""

from collections import deque
from dataclasses import dataclass, field

import torch

from servecap.ledger import dtypes
from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.state import STATE_DTYPES, state_bytes_per_request, state_shapes

NULL_SLOTS = 1
STATE_TORCH_DTYPES = dict(zip(STATE_DTYPES, (torch.float32, torch.bfloat16, torch.float16),
                              strict=True))


def state_dtype(name: str) -> torch.dtype:
    """The torch dtype of a state the ledger names ('float32', 'bf16', ...)."""
    return STATE_TORCH_DTYPES[dtypes.lookup(name, "mamba_ssm_cache_dtype", STATE_DTYPES).name]


class StatePool:
    """conv: (state layers, slots + 1, kernel - 1, conv_dim); recurrent: (state layers,
    slots + 1, heads, a, b). Slot `num_slots` is the null slot."""

    def __init__(self, spec: ModelSpec, num_slots: int, device: str | torch.device = "cpu",
                 tensor_parallel_size: int = 1) -> None:
        if spec.state is None or not spec.state_layers:
            raise SpecError("state", None, "the model has no linear-attention or Mamba layers")
        if num_slots < 1:
            raise SpecError("num_state_slots", num_slots, "the state pool needs at least one")
        state = spec.state
        conv, recurrent = state_shapes(state, tensor_parallel_size)
        self.index = {layer: i for i, layer in enumerate(spec.state_layers)}
        self.num_slots, self.null_slot = num_slots, num_slots
        rows = (len(self.index), num_slots + NULL_SLOTS)
        self.conv = torch.zeros(*rows, *conv, dtype=state_dtype(state.conv_dtype), device=device)
        self.recurrent = torch.zeros(*rows, *recurrent, dtype=state_dtype(state.ssm_dtype),
                                     device=device)
        self.slot_bytes = state_bytes_per_request(spec, tp=tensor_parallel_size)
        if self.tensor_bytes != self.slot_bytes * (num_slots + NULL_SLOTS):
            raise AssertionError("state pool tensors disagree with the ledger's state bytes")

    @property
    def tensor_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.conv, self.recurrent))

    def layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(conv, recurrent) pages of one layer, each (slots + 1, ...)."""
        i = self.index[layer]
        return self.conv[i], self.recurrent[i]

    def clear_slot(self, slot: int) -> None:
        """A request starts from zero states (its first token may run as a decode row)."""
        self.conv[:, slot].zero_()
        self.recurrent[:, slot].zero_()

    def copy_slot(self, src: int, dst: int) -> None:
        """A forked sample starts from its parent's state in every layer."""
        self.conv[:, dst] = self.conv[:, src]
        self.recurrent[:, dst] = self.recurrent[:, src]


class StateSlots:
    """Which slots are free. Plain Python, like the block manager."""

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self.free_ids: deque[int] = deque(range(num_slots))

    @property
    def num_free(self) -> int:
        return len(self.free_ids)

    def take(self) -> int:
        if not self.free_ids:
            raise MemoryError("no free state slot")
        return self.free_ids.popleft()

    def release(self, slot: int) -> None:
        if slot in self.free_ids or not 0 <= slot < self.num_slots:
            raise AssertionError(f"state slot {slot} released twice or unknown")
        self.free_ids.append(slot)


@dataclass
class StateSpan:
    """One prefill chunk: its rows in the step, its slot, and whether it starts a sequence (a
    fresh state: zeros) or continues one (the slot's state)."""

    rows: slice
    slot: int
    fresh: bool


@dataclass
class StateStep:
    """One step's state layout: the first num_decode rows are one-token decodes of the
    sequences in decode_slots, then the prefill spans."""

    pool: StatePool
    decode_slots: torch.Tensor
    spans: list[StateSpan] = field(default_factory=list)

    @property
    def num_decode(self) -> int:
        return int(self.decode_slots.numel())
