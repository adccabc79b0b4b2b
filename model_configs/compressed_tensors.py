"""Read a compressed-tensors quantization_config (llm-compressor's format) into a Quant."""

from typing import Any

from servecap.ledger.errors import SpecError
from servecap.ledger.model import Quant

FIELD = "quantization_config.config_groups"


def parse_compressed_tensors(qc: dict[str, Any]) -> Quant:
    """The first config group's weight scheme: fp8 per tensor/channel/block (fp32 scales), int
    4/8 per group or channel (16-bit scales, zero points when asymmetric), NVFP4
    (tensor_group of 16 with an fp8 scale and a per-tensor one). `ignore` stays dense."""
    groups = qc.get("config_groups") or {}
    first = next(iter(groups.values()), None) if isinstance(groups, dict) else None
    weights = (first or {}).get("weights") if isinstance(first, dict) else None
    if not isinstance(weights, dict):
        raise SpecError(FIELD, groups, "a config group with a 'weights' scheme")
    bits, kind = int(weights.get("num_bits", 0)), str(weights.get("type", "int"))
    strategy = str(weights.get("strategy", "tensor"))
    skip = tuple(str(p) for p in qc.get("ignore") or ())
    if kind == "float" and bits == 4 and strategy == "tensor_group":
        return Quant("nvfp4", 4, "microblock", group_size=int(weights.get("group_size") or 16),
                     scale_bits=8, per_tensor_scale=True, modules_not_converted=skip)
    if kind == "float" and bits == 8:
        return _fp8(weights, strategy, skip)
    if kind == "int" and bits in (4, 8):
        return _int(weights, bits, strategy, skip)
    raise SpecError(FIELD + ".weights", {"num_bits": bits, "type": kind, "strategy": strategy},
                    "understood: float 8 (tensor, channel, block), int 4/8 (group, channel), "
                    "float 4 tensor_group (NVFP4)")


def _fp8(weights: dict[str, Any], strategy: str, skip: tuple[str, ...]) -> Quant:
    if strategy == "block":
        rows, cols = weights.get("block_structure") or (128, 128)
        return Quant("fp8", 8, "block", scale_bits=32, block_shape=(int(rows), int(cols)),
                     modules_not_converted=skip)
    granularity = "channel" if strategy == "channel" else "tensor"
    return Quant("fp8", 8, granularity, scale_bits=32, modules_not_converted=skip)


def _int(weights: dict[str, Any], bits: int, strategy: str, skip: tuple[str, ...]) -> Quant:
    zero = not weights.get("symmetric", True)
    if strategy == "group":
        return Quant(f"int{bits}", bits, "group", group_size=int(weights.get("group_size") or 128),
                     zero_point=zero, modules_not_converted=skip)
    return Quant(f"int{bits}", bits, "channel", modules_not_converted=skip)
