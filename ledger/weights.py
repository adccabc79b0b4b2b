"""Weight memory: parameters x bits, plus quantization metadata (scales, zero points) kept apart."""

import re
from dataclasses import dataclass
from fnmatch import fnmatch

from .arch import EMBED, HEAD, LINEAR, TensorGroup, count_parameters, inventory
from .dtypes import bits_to_bytes
from .errors import SpecError
from .model import ModelSpec, Quant


@dataclass(frozen=True)
class WeightBytes:
    """param_bytes: the values themselves; metadata_bytes: scales/zero points/packing extras."""

    param_bytes: int
    metadata_bytes: int
    num_parameters: int
    quantized_parameters: int
    how: str


def default_quant(dtype_name: str, group_size: int = 128, zero_point: bool = True) -> Quant | None:
    """The scheme a bare --weight-dtype means: int4 as AWQ-style groups, int8 per output
    channel (fp16 scales), fp8 per tensor (one fp32 scale); 16/32-bit formats need none."""
    if dtype_name == "int4":
        return Quant("int4", 4, "group", group_size=group_size, zero_point=zero_point)
    if dtype_name == "int8":
        return Quant("int8", 8, "channel")
    if dtype_name == "fp8":
        return Quant("fp8", 8, "tensor", scale_bits=32)
    if dtype_name == "fp4":
        return Quant("mxfp4", 4, "microblock", group_size=32, scale_bits=8)
    return None


def weight_bytes(spec: ModelSpec, dense_bits: int, quant: Quant | None,
                 groups: list[TensorGroup] | None = None) -> WeightBytes:
    """M_weights = P x b_w + M_metadata (seed 000). Unquantized tensors stay at `dense_bits`.
    `groups` is one rank's share of the inventory (servecap.ledger.sharding); default: all."""
    if quant is None and groups is None:
        params = count_parameters(spec)
        return WeightBytes(bits_to_bytes(params * dense_bits), 0, params, 0,
                           f"{params:,} params x {dense_bits} bits")
    if quant is None:
        params = sum(g.numel for g in groups)
        return WeightBytes(bits_to_bytes(params * dense_bits), 0, params, 0,
                           f"{params:,} params on this rank x {dense_bits} bits")
    if not spec.has_architecture:
        return _flat_quant(spec, quant)
    param_bits = meta_bits = quantized = total = 0
    for group in groups if groups is not None else inventory(spec):
        total += group.numel
        if _is_quantized(group, quant):
            quantized += group.numel
            param_bits += group.numel * quant.bits
            meta_bits += _metadata_bits(group, quant)
        else:
            param_bits += group.numel * dense_bits
    how = (f"{quantized:,} params at {quant.bits} bits ({quant.method}), "
           f"{total - quantized:,} at {dense_bits} bits")
    return WeightBytes(bits_to_bytes(param_bits), bits_to_bytes(meta_bits), total, quantized, how)


def _is_quantized(group: TensorGroup, quant: Quant) -> bool:
    """Only matmul weights are packed; embeddings, lm_head, norms and biases stay dense, as in
    every supported format. modules_to_not_convert removes more (attention, routers)."""
    if group.kind != LINEAR:
        return False
    path = _module_path(group)
    return not any(_matches(path, pattern) for pattern in quant.modules_not_converted if pattern)


def _matches(path: str, pattern: str) -> bool:
    """'model.layers.*.self_attn' globs a module and its children; a plain name ('lm_head',
    'gate') matches as a substring, the way the formats' own loaders test it."""
    if pattern.startswith("re:"):  # compressed-tensors' regex form
        return re.search(pattern[3:], path) is not None
    if "*" in pattern or "?" in pattern:
        return fnmatch(path, pattern) or fnmatch(path, pattern + ".*")
    return pattern in path


def _module_path(group: TensorGroup) -> str:
    """'self_attn.q_proj' -> 'model.layers.self_attn.q_proj' so patterns like 'self_attn',
    'mlp.router' or 'lm_head' match the way modules_to_not_convert lists them."""
    if group.kind in (EMBED, HEAD) or group.name == "norm":
        return ("model." if group.kind == EMBED else "") + group.name
    layer = group.layers[0] if group.layers else 0
    return f"model.layers.{layer}.{group.name}"


def _metadata_bits(group: TensorGroup, quant: Quant) -> int:
    """Scales (and zero points, g_idx) of every matrix in the group, each in its own
    orientation: scales run along the output rows, groups along the input columns."""
    bits = sum(_matrix_metadata_bits(rows, cols, count, quant)
               for rows, cols, count in _matrices(group))
    return bits + (_g_idx_bits(group) if quant.method == "gptq" else 0)


def _matrices(group: TensorGroup) -> list[tuple[int, int, int]]:
    """(out rows, in cols, count). A gated MLP group (gate, up, down) holds inter x hidden
    gate/up and a hidden x inter down projection."""
    if group.name.startswith("mlp.") and group.count % 3 == 0:
        per = group.count // 3
        return [(group.rows, group.cols, 2 * per), (group.cols, group.rows, per)]
    return [(group.rows, group.cols, group.count)]


def _matrix_metadata_bits(rows: int, cols: int, count: int, quant: Quant) -> int:
    if quant.granularity == "group":
        per_group = quant.scale_bits + (quant.bits if quant.zero_point else 0)
        per_row = -(-cols // quant.group_size) if quant.group_size > 0 else 1  # 0: per channel
        return count * rows * per_row * per_group
    if quant.granularity == "channel":
        return count * rows * quant.scale_bits
    if quant.granularity == "tensor":
        return count * quant.scale_bits
    if quant.granularity == "block":
        br, bc = quant.block_shape
        return count * -(-rows // br) * -(-cols // bc) * quant.scale_bits
    if quant.granularity == "microblock":
        tensor_scale = 32 if quant.per_tensor_scale else 0
        return count * (rows * -(-cols // quant.group_size) * quant.scale_bits + tensor_scale)
    raise SpecError("quantization.granularity", quant.granularity,
                    "allowed: group, channel, tensor, block, microblock")


def _g_idx_bits(group: TensorGroup) -> int:
    """GPTQ checkpoints store g_idx, one int32 per input column of every matrix."""
    return sum(cols * count * 32 for _, cols, count in _matrices(group))


def _flat_quant(spec: ModelSpec, quant: Quant) -> WeightBytes:
    """Only a parameter count is known: every parameter is taken as quantized, in groups."""
    params = count_parameters(spec)
    if quant.granularity in ("group", "microblock") and quant.group_size > 0:
        per_group = quant.scale_bits + (quant.bits if quant.zero_point else 0)
        meta = -(-params // quant.group_size) * per_group
    elif quant.granularity == "block":
        meta = -(-params // (quant.block_shape[0] * quant.block_shape[1])) * quant.scale_bits
    else:
        raise SpecError("hidden_size", spec.hidden_size, f"{quant.granularity} scales need the "
                        "architecture (hidden_size, vocab_size, ...) to count channels or tensors")
    return WeightBytes(bits_to_bytes(params * quant.bits), bits_to_bytes(meta), params, params,
                       f"{params:,} params at {quant.bits} bits, all taken as quantized")
