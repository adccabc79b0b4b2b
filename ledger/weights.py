"""Weight memory: parameters x bits, plus quantization metadata (scales, zero points) kept apart."""

from dataclasses import dataclass

from .arch import TensorGroup, count_parameters, inventory
from .dtypes import bits_to_bytes, lookup
from .errors import SpecError
from .model import ModelSpec, Quant
from .module_formats import resolver
from .module_paths import ModuleTensor, module_tensors


@dataclass(frozen=True)
class WeightBytes:
    """param_bytes: the values themselves; metadata_bytes: scales/zero points/packing extras."""

    param_bytes: int
    metadata_bytes: int
    num_parameters: int
    quantized_parameters: int
    how: str
    by_format: tuple["FormatShare", ...] = ()


@dataclass(frozen=True)
class FormatShare:
    """One storage format's part of the weights: its parameters, value bytes, metadata bytes
    (each rounded up on its own; the weights lines round the sums)."""

    name: str
    bits: int
    num_parameters: int
    value_bytes: int
    metadata_bytes: int
    scales: str = ""  # what the format stores beside its values ('' : dense)


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
    """M_weights = P x b_w + M_metadata (seed 000), each module in the format its checkpoint
    stores it in; unquantized modules stay at `dense_bits`. `groups` is one rank's share of
    the inventory (servecap.ledger.sharding); default: all."""
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
    shares = _shares(spec, dense_bits, quant, groups if groups is not None else inventory(spec))
    dense = _dense_name(spec, dense_bits)
    total = sum(s.params for s in shares.values())
    quantized = sum(s.params for name, s in shares.items() if name != dense)
    by_format = tuple(FormatShare(name, s.bits, s.params, bits_to_bytes(s.value_bits),
                                  bits_to_bytes(s.meta_bits), s.scales)
                      for name, s in shares.items())
    return WeightBytes(bits_to_bytes(sum(s.value_bits for s in shares.values())),
                       bits_to_bytes(sum(s.meta_bits for s in shares.values())), total,
                       quantized, _how(by_format), by_format)


@dataclass
class _Share:
    bits: int
    scales: str = ""
    params: int = 0
    value_bits: int = 0
    meta_bits: int = 0


def _shares(spec: ModelSpec, dense_bits: int, quant: Quant,
            groups: list[TensorGroup]) -> dict[str, _Share]:
    """Parameters, value bits and metadata bits per storage format, quantized ones first."""
    res, dense = resolver(quant), _dense_name(spec, dense_bits)
    out: dict[str, _Share] = {}
    for group in groups:
        for tensor in module_tensors(spec, group):
            fmt = res.format_of(tensor)
            numel = tensor.rows * tensor.cols * tensor.count
            name, bits = (dense, dense_bits) if fmt is None else (
                fmt.name, fmt.bits // (2 if fmt.sparse_24 else 1))  # 2:4: half the values
            share = out.setdefault(name, _Share(bits, "" if fmt is None else scales_text(fmt)))
            share.params += numel
            if fmt is None:
                share.value_bits += numel * dense_bits
            else:
                share.value_bits += numel * bits
                share.meta_bits += _tensor_metadata_bits(tensor, fmt)
    return dict(sorted(out.items(), key=lambda item: (item[0] == dense, item[1].bits)))


def _dense_name(spec: ModelSpec, dense_bits: int) -> str:
    """The dtype unquantized modules are stored in (the checkpoint's, at `dense_bits`)."""
    try:
        stored = lookup(spec.checkpoint_dtype, "torch_dtype")
    except SpecError:
        stored = None
    return stored.name if stored is not None and stored.bits == dense_bits else \
        f"{dense_bits}-bit"


def _how(by_format: tuple["FormatShare", ...]) -> str:
    """'nvfp4: 20,808,990,720 params x 4 bits = 10,404,495,360 B; bf16: ...' (dense last)."""
    return "; ".join(f"{s.name}: {s.num_parameters:,} params x {s.bits} bits = "
                     f"{s.value_bytes:,} B" for s in by_format)


def metadata_text(weights: WeightBytes) -> str:
    """Each quantized format's scales: 'nvfp4: 1,300,563,360 B (e4m3 scale per 16 values,
    fp32 scale and input scale per matrix)'."""
    parts = [f"{s.name}: {s.metadata_bytes:,} B ({s.scales})" for s in weights.by_format
             if s.scales]
    return "; ".join(parts) or f"scales/zero points of {weights.quantized_parameters:,} " \
        "quantized params"


def scales_text(fmt: Quant) -> str:
    """What one format stores beside its values, in words."""
    size = {8: "8-bit", 16: "fp16", 32: "fp32"}.get(fmt.scale_bits, f"{fmt.scale_bits}-bit")
    if fmt.method == "nvfp4":
        size = "e4m3"
    text = {"group": f"{size} scale{f' + {fmt.bits}-bit zero point' if fmt.zero_point else ''}"
                     f" per {fmt.group_size or 'row'} values" if fmt.group_size else
                     f"{size} scale per output row",
            "channel": f"{size} scale per output row",
            "tensor": f"{size} scale per matrix",
            "block": f"{size} scale per {fmt.block_shape[0]}x{fmt.block_shape[1]} block",
            "microblock": f"{size} scale per {fmt.group_size} values"}[fmt.granularity]
    extras = [text]
    if fmt.per_tensor_scale:
        extras.append("fp32 scale per matrix")
    if fmt.input_scale:
        extras.append("fp32 input scale per matrix")
    if fmt.method == "gptq":
        extras.append("int32 g_idx per input column")
    if fmt.sparse_24:
        extras.append("1-bit 2:4 mask per value")
    return ", ".join(extras)


def _tensor_metadata_bits(tensor: ModuleTensor, fmt: Quant) -> int:
    """Scales (and zero points, GPTQ's g_idx, static activation scales, a 2:4 mask) of the
    module's matrices: scales run along the output rows, groups along the input columns."""
    rows, cols, count = tensor.rows, tensor.cols, tensor.count
    bits = _matrix_metadata_bits(rows, cols, count, fmt)
    if fmt.method == "gptq":
        bits += cols * count * 32  # g_idx: one int32 per input column
    if fmt.input_scale:
        bits += count * 32
    bits += count * fmt.extra_bits_per_matrix
    if fmt.sparse_24:
        bits += rows * cols * count  # the bitmask: one bit per element
    return bits


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
