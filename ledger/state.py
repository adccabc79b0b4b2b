"""Fixed per-request state of linear-attention and Mamba-2 layers: conv + recurrent bytes."""

from . import dtypes
from .errors import SpecError
from .model import ModelSpec, StateShape

STATE_DTYPES = ("fp32", "bf16", "fp16")


def _heads_on_rank(count: int, tp: int, field: str) -> int:
    """vLLM's divide(): the state's sharded dims must split evenly across ranks."""
    if count % tp:
        raise SpecError("--tensor-parallel-size", tp, f"must divide {field} = {count} (vLLM "
                        "splits the state evenly across ranks)")
    return count // tp


def state_shapes(state: StateShape, tp: int = 1, num_spec: int = 0):
    """((conv_kernel - 1 + num_spec, conv_dim / tp), (heads / tp, *recurrent_shape)): vLLM's
    MambaStateShapeCalculator (mamba2_state_shape / gated_delta_net_state_shape, "SD" layout).
    Mamba-2 replicates the B/C groups when n_groups % tp != 0 (extra_groups_for_head_shards)."""
    conv_dim = state.conv_dim
    if state.n_groups and state.n_groups % tp:
        extra = tp - state.n_groups
        conv_dim = state.intermediate + 2 * (state.n_groups + extra) * state.d_state
    conv = (state.conv_kernel - 1 + num_spec, _heads_on_rank(conv_dim, tp, "conv_dim"))
    heads = _heads_on_rank(state.recurrent_heads, tp, "the state's heads")
    return conv, (heads, *state.recurrent_shape)


def state_bytes_per_layer(state: StateShape, tp: int = 1) -> int:
    """conv elements x conv dtype + recurrent elements x ssm dtype: one layer, one request."""
    conv, recurrent = state_shapes(state, tp)
    conv_bits = dtypes.lookup(state.conv_dtype, "mamba_cache_dtype", STATE_DTYPES).bits
    ssm_bits = dtypes.lookup(state.ssm_dtype, "mamba_ssm_cache_dtype", STATE_DTYPES).bits
    return dtypes.bits_to_bytes(_numel(conv) * conv_bits + _numel(recurrent) * ssm_bits)


def state_bytes_per_request(spec: ModelSpec, layer_ids: tuple[int, ...] | None = None,
                            tp: int = 1) -> int:
    """Σ over the state layers this shard holds: a constant in context (0 without states)."""
    if spec.state is None:
        return 0
    held = set(layer_ids) if layer_ids is not None else None
    layers = [n for n in spec.state_layers if held is None or n in held]
    return len(layers) * state_bytes_per_layer(spec.state, tp)


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out
