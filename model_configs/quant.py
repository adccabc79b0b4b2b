"""Read a config.json quantization_config into the ledger's Quant; unknown formats fail closed."""

from typing import Any

from servecap.ledger.errors import SpecError
from servecap.ledger.model import Quant

KNOWN = ("awq", "gptq", "fp8", "mxfp4", "modelopt", "compressed-tensors", "auto-round",
         "bitsandbytes")


def parse_quantization(qc: dict[str, Any] | None) -> Quant | None:
    """The checkpoint's Quant; a field of the wrong type or shape fails closed, named."""
    try:
        return _parse(qc)
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        if isinstance(exc, SpecError):
            raise
        raise SpecError("quantization_config", qc, "fields of the types its format publishes "
                        f"(bits and group_size whole numbers, block sizes two numbers): {exc}"
                        ) from None


def _parse(qc: dict[str, Any] | None) -> Quant | None:
    """AWQ/GPTQ: group scales (fp16) + packed zero points; fp8: per-tensor, per-channel or
    128x128-block fp32 scales; MXFP4: 32-element blocks, one 8-bit scale; NVFP4: 16-element
    blocks, one fp8 scale, plus one fp32 per-tensor scale."""
    if not qc:
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method == "modelopt" or (not method and isinstance(qc.get("quantization"), dict)):
        from .modelopt import parse_modelopt  # each format's reader loads when it is met

        return parse_modelopt(qc)  # the second: hf_quant_config.json as vLLM reads it
    skip = tuple(qc.get("modules_to_not_convert") or qc.get("ignored_layers") or ())
    if method in ("awq", "gptq"):
        return _grouped(method, qc, skip)
    if method == "fp8":
        return _fp8(qc, skip)
    if method == "compressed-tensors":
        from .compressed_tensors import parse_compressed_tensors

        return parse_compressed_tensors(qc)
    if method in ("auto-round", "autoround", "intel/auto-round"):
        from .int_formats import parse_auto_round

        return parse_auto_round(qc)
    if method == "bitsandbytes":
        from .int_formats import parse_bitsandbytes

        return parse_bitsandbytes(qc)
    if method == "mxfp4":
        return Quant("mxfp4", 4, "microblock", group_size=32, scale_bits=8,
                     modules_not_converted=skip)
    raise SpecError("quantization_config.quant_method", qc.get("quant_method"),
                    "understood: " + ", ".join(KNOWN))


def _grouped(method: str, qc: dict[str, Any], skip: tuple[str, ...]) -> Quant:
    bits = _whole(qc.get("bits", qc.get("w_bit", 4)), "bits")
    group = _whole(qc.get("group_size", qc.get("q_group_size", 128)), "group_size")
    if bits not in (2, 3, 4, 8) or group < 1 and group != -1:
        raise SpecError("quantization_config.bits/group_size", (bits, group),
                        "bits in 2, 3, 4, 8 and a positive group_size (or -1: per channel)")
    # GPTQ stores qzeros even when symmetric; AWQ only with zero_point: true.
    zero = True if method == "gptq" else bool(qc.get("zero_point", True))
    return Quant(method, bits, "group", group_size=max(group, 0), zero_point=zero,
                 modules_not_converted=skip, quantizes_lm_head=bool(qc.get("lm_head")),
                 act_order=bool(qc.get("desc_act")))


def _whole(value: Any, name: str) -> int:
    """4 or 4.0 -> 4; 4.7 is refused rather than read as 4."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"quantization_config.{name}", value, "a whole number")
    number = float(value)
    if not number.is_integer():
        raise SpecError(f"quantization_config.{name}", value, "a whole number (not a fraction)")
    return int(number)


def _fp8(qc: dict[str, Any], skip: tuple[str, ...]) -> Quant:
    block = qc.get("weight_block_size")
    if block:
        return Quant("fp8", 8, "block", scale_bits=32, block_shape=(int(block[0]), int(block[1])),
                     modules_not_converted=skip)
    strategy = str(qc.get("weight_granularity", qc.get("strategy", "tensor"))).lower()
    granularity = "channel" if "channel" in strategy else "tensor"
    return Quant("fp8", 8, granularity, scale_bits=32, modules_not_converted=skip)
