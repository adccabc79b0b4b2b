"""Read auto-round and bitsandbytes quantization_configs into a Quant, each as its checkpoint
stores it: auto-round in the GPTQ or AWQ packing it names (per-layer bits from extra_config),
bitsandbytes 4-bit as packed nibbles with an absmax per 64 values (8-bit with double
quantization) and 8-bit as int8 with an fp32 SCB per output row."""

from dataclasses import replace
from typing import Any

from servecap.ledger.errors import SpecError
from servecap.ledger.model import Quant

AUTO_ROUND = "quantization_config"
BNB_BLOCK = 64  # bitsandbytes' 4-bit blocksize: one absmax per 64 values
BNB_MAPS_BITS = (16 + 256) * 32  # the fp32 quant_map (16) and nested_quant_map (256)


def parse_auto_round(qc: dict[str, Any]) -> Quant:
    """vLLM's INCConfig (vllm/model_executor/layers/quantization/inc/inc.py @v0.32.0) takes
    packing_format auto_round:auto_gptq (the default) or auto_round:auto_awq for int weights."""
    data_type = str(qc.get("data_type", "int"))
    packing = str(qc.get("packing_format", "auto_round:auto_gptq"))
    if data_type != "int" or packing not in ("auto_round:auto_gptq", "auto_round:auto_awq"):
        raise SpecError(f"{AUTO_ROUND}.packing_format", {"data_type": data_type,
                                                        "packing_format": packing},
                        "understood: data_type int with auto_round:auto_gptq or "
                        "auto_round:auto_awq")
    method = "gptq" if packing.endswith("gptq") else "awq"
    base = _int_scheme(method, qc.get("bits", 4), qc.get("group_size", 128),
                       not qc.get("sym", True) or method == "gptq", AUTO_ROUND)
    rules = []
    extra = qc.get("extra_config") or {}
    if not isinstance(extra, dict):
        raise SpecError(f"{AUTO_ROUND}.extra_config", extra, "a mapping of module to scheme")
    for name, cfg in extra.items():
        if not isinstance(cfg, dict):
            raise SpecError(f"{AUTO_ROUND}.extra_config.{name}", cfg, "an object with bits")
        bits = cfg.get("bits", base.bits)
        rules.append((str(name), None if bits >= 16 else _int_scheme(
            method, bits, cfg.get("group_size", base.group_size or -1),
            not cfg.get("sym", True) or method == "gptq", f"{AUTO_ROUND}.extra_config.{name}")))
    dense = tuple(name for name, fmt in rules if fmt is None)
    return replace(base, module_formats=tuple((n, f) for n, f in rules if f is not None),
                   modules_not_converted=dense, patterns="segment")


def _int_scheme(method: str, bits: Any, group: Any, zero: bool, field: str) -> Quant:
    if isinstance(bits, bool) or bits not in (2, 3, 4, 8) or isinstance(group, bool) or \
            not isinstance(group, int) or (group < 1 and group != -1):
        raise SpecError(f"{field}.bits/group_size", (bits, group),
                        "bits in 2, 3, 4, 8 and a group_size >= 1 (or -1: per channel)")
    return Quant(method, bits, "group", group_size=max(group, 0), zero_point=zero,
                 label=f"auto-round {method} int{bits}")


def parse_bitsandbytes(qc: dict[str, Any]) -> Quant:
    """load_in_4bit (nf4 or fp4, double quantization or not) or load_in_8bit; the skip list
    (llm_int8_skip_modules) stays dense; lm_head is never converted."""
    skip = qc.get("llm_int8_skip_modules") or []
    if not isinstance(skip, list) or not all(isinstance(s, str) for s in skip):
        raise SpecError("quantization_config.llm_int8_skip_modules", skip, "a list of names")
    if qc.get("load_in_4bit"):
        kind = str(qc.get("bnb_4bit_quant_type", "fp4"))
        if kind not in ("nf4", "fp4"):
            raise SpecError("quantization_config.bnb_4bit_quant_type", kind, "nf4 or fp4")
        double = bool(qc.get("bnb_4bit_use_double_quant", False))
        return Quant(f"bnb-{kind}", 4, "group", group_size=BNB_BLOCK,
                     scale_bits=8 if double else 32, extra_bits_per_matrix=BNB_MAPS_BITS,
                     modules_not_converted=tuple(skip),
                     label=f"bitsandbytes {kind}{' (double quant)' if double else ''}")
    if qc.get("load_in_8bit"):
        return Quant("bnb-int8", 8, "channel", scale_bits=32,
                     modules_not_converted=tuple(skip), label="bitsandbytes int8")
    raise SpecError("quantization_config.load_in_4bit", None,
                    "a bitsandbytes checkpoint sets load_in_4bit or load_in_8bit")
