"""The weights line of a checkpoint whose safetensors headers were read: bytes of values and
of metadata per dtype, as stored, and the parameters those tensors hold."""

from servecap.ledger.model import ModelSpec
from servecap.ledger.weights import FormatShare, WeightBytes, weight_bytes

from .safetensors_headers import HeaderBytes

WIDTH_BITS = {"BF16": 16, "F16": 16, "F32": 32, "F64": 64, "F8_E4M3": 8, "F8_E5M2": 8,
              "U8": 8, "I8": 8, "I16": 16, "I32": 32, "I64": 64, "F8_E8M0": 8}


def from_headers(found: HeaderBytes, spec: ModelSpec) -> tuple[WeightBytes, str]:
    """(WeightBytes, where from): the headers' bytes; parameters from their shapes (the
    formula's count where only an index's total_size is known)."""
    counts = weight_bytes(spec, 16, spec.quant) if spec.has_architecture else None
    formula = counts.num_parameters if counts else 0
    quantized = counts.quantized_parameters if counts else 0
    if not found.num_files:
        return (WeightBytes(found.param_bytes, found.metadata_bytes, formula, quantized, ""),
                "model.safetensors.index.json metadata.total_size")
    packed = spec.quant.bits if spec.quant is not None and spec.quant.bits < 8 else 4
    shares = tuple(FormatShare(dtype, WIDTH_BITS.get(dtype) or round(values * 8 / max(numel, 1)),
                               numel, values, meta,
                               "scales, zero points, indices" if meta else "")
                   for dtype, values, meta, numel in found.by_dtype)
    stored = ", ".join(f"{dtype} {values:,} B" for dtype, values, _, _ in found.by_dtype
                       if values)
    kind = "GGUF header" if found.gguf else "safetensors headers"
    source = f"{kind}: {found.num_tensors:,} tensors in {found.num_files} file(s): {stored}"
    return (WeightBytes(found.param_bytes, found.metadata_bytes,
                        found.parameters(packed) or formula, quantized, "", shares), source)
