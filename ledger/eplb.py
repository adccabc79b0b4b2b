"""Expert-parallel load balancing (vLLM's --enable-eplb): the redundant experts each rank holds
beyond its share, the buffer an expert move goes through, and the load-tracking tables.

vLLM places E + R physical experts over the ep = tp x dp ranks of the expert-parallel group
(vllm/model_executor/layers/fused_moe/layer.py: global_num_experts = num_experts +
num_redundant_experts, which ep must divide), so every MoE layer of a rank holds (E + R) / ep
experts where it held E / ep. With EPLB on, EplbState (vllm/distributed/eplb/eplb_state.py,
read at v0.9.2, v0.10.2, v0.12.0 and v0.33.0) keeps on the device, inside the weights'
measurement ('Model loading took'): physical_to_logical_map (layers x physical, int64),
logical_to_physical_map (layers x logical x slots, int64: slots = R + 1 before v0.10.0, then
MAX_EXPERT_REDUNDANCY + 1 = 1024), logical_replica_count (layers x logical, int64),
expert_load_pass (layers x physical, int32), expert_load_window (window x layers x physical,
int32) and, from v0.12.0, expert_buffer: one layer's local experts again (torch.empty_like of
expert_weights[0]), through which a rearrangement moves weights."""

from dataclasses import dataclass

from .arch import routed_layers
from .errors import SpecError
from .kv import Shard
from .lines import Line
from .model import ModelSpec
from .sharding import Stage, rank_inventory
from .weights import weight_bytes

SLOTS_FROM = (0, 10, 0)  # logical_to_physical_map sized for MAX_EXPERT_REDUNDANCY (1023) + 1
MAX_EXPERT_REDUNDANCY = 1023
BUFFER_FROM = (0, 12, 0)  # expert_buffer allocated with the state, not at each move
DEFAULT_WINDOW = 1000  # EPLBConfig.window_size


@dataclass(frozen=True)
class EplbSpec:
    """--enable-eplb with num_redundant_experts R over an expert-parallel group of ep_size
    ranks (tp x dp), window_size steps of load history, under a release's rules."""

    num_redundant_experts: int = 0
    ep_size: int = 1
    window_size: int = DEFAULT_WINDOW
    release: tuple[int, ...] = (0, 33, 0)

    def __post_init__(self) -> None:
        if not isinstance(self.num_redundant_experts, int) or self.num_redundant_experts < 0:
            raise SpecError("num_redundant_experts", self.num_redundant_experts,
                            "a whole number >= 0 (--eplb-config)")
        if self.num_redundant_experts > MAX_EXPERT_REDUNDANCY:
            raise SpecError("num_redundant_experts", self.num_redundant_experts,
                            f"at most {MAX_EXPERT_REDUNDANCY} (vLLM's MAX_EXPERT_REDUNDANCY)")
        if self.ep_size < 2:
            raise SpecError("--enable-eplb", True, "needs an expert-parallel group of more "
                            "than one rank: --enable-expert-parallel with tp x dp > 1")


def experts_per_rank(num_experts: int, ep_size: int, redundant: int = 0) -> int:
    """Physical experts one rank holds in each MoE layer: (E + R) / ep, which ep must divide
    (vLLM refuses the split otherwise)."""
    total = num_experts + redundant
    if total % ep_size:
        raise SpecError("num_redundant_experts", redundant, f"experts + redundant ({total}) "
                        f"must divide by the expert-parallel size {ep_size} (tp x dp)")
    return total // ep_size


@dataclass(frozen=True)
class EplbBytes:
    redundant_bytes: int  # R / ep experts x MoE layers on this rank
    buffer_bytes: int  # one layer's local experts (v0.12.0 on)
    table_bytes: int  # the maps and the load window
    how: str

    @property
    def total(self) -> int:
        return self.redundant_bytes + self.buffer_bytes + self.table_bytes


def eplb_bytes(spec: ModelSpec, eplb: EplbSpec, shard: Shard, dense_bits: int,
               quant) -> EplbBytes:
    """This rank's EPLB memory (its stage's MoE layers)."""
    layers = [n for n in routed_layers(spec) if n in shard.layer_ids(spec)]
    if spec.moe is None or not routed_layers(spec):
        raise SpecError("--enable-eplb", spec.name, "EPLB balances routed experts: this model "
                        "has none")
    e, r = spec.moe.num_experts, eplb.num_redundant_experts
    local = experts_per_rank(e, eplb.ep_size, r)
    one = expert_bytes(spec, dense_bits, quant)
    # beyond the weights line's E / ep share of each layer's experts
    redundant = len(layers) * (local * one - e * one // eplb.ep_size)
    buffer = local * one if eplb.release >= BUFFER_FROM and layers else 0
    tables = _tables(len(routed_layers(spec)), e, e + r, eplb)
    how = (f"{r} redundant experts over ep {eplb.ep_size}: {local} experts a layer where "
           f"{e / eplb.ep_size:g} were, x {len(layers)} MoE layers x {one:,} B"
           + (f"; move buffer {local} experts" if buffer else "")
           + f"; load tables {tables:,} B (window {eplb.window_size})")
    return EplbBytes(redundant, buffer, tables, how)


def expert_bytes(spec: ModelSpec, dense_bits: int, quant) -> int:
    """One routed expert of one layer, values and quantization metadata (its bias too)."""
    layer = routed_layers(spec)[0]
    groups = [g for g in rank_inventory(spec, 1, Stage(0, (layer,), False, False))
              if g.name in ("mlp.experts", "mlp.experts.bias")]
    found = weight_bytes(spec, dense_bits, quant, groups)
    return (found.param_bytes + found.metadata_bytes) // spec.moe.num_experts


def _tables(moe_layers: int, logical: int, physical: int, eplb: EplbSpec) -> int:
    """The maps and load history, as EplbState.build allocates them (int64 maps, int32 loads);
    every rank holds the whole model's."""
    slots = MAX_EXPERT_REDUNDANCY + 1 if eplb.release >= SLOTS_FROM \
        else eplb.num_redundant_experts + 1
    maps = moe_layers * (physical + logical * slots + logical) * 8
    loads = moe_layers * physical * 4 * (1 + eplb.window_size)
    return maps + loads


def eplb_lines(spec: ModelSpec, eplb: EplbSpec | None, shard: Shard, dense_bits: int,
               quant) -> tuple[Line, ...]:
    if eplb is None:
        return ()
    found = eplb_bytes(spec, eplb, shard, dense_bits, quant)
    return (Line("eplb", "redundant experts and EPLB state", found.total, found.how),)
