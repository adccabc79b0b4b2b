"""Read a compressed-tensors quantization_config (llm-compressor's format) into a Quant: every
config group's weight scheme on the modules its targets name, the ignore list dense, and a
2:4 sparsity_config's bitmask compression on top (as compressed-tensors writes each: int
weights packed in int32 with a 2 x int64 weight_shape, fp8 e4m3, nvfp4 packed in uint8)."""

from dataclasses import replace
from typing import Any

from servecap.ledger.errors import SpecError
from servecap.ledger.model import Quant

FIELD = "quantization_config.config_groups"
SHAPE_BITS = 128  # weight_shape: int64 (2,) beside each packed int matrix


def parse_compressed_tensors(qc: dict[str, Any]) -> Quant:
    """A group targeting 'Linear' is the default format; groups naming modules (or 're:'
    regexes) take theirs; with no 'Linear' group a module none names stays dense."""
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict) or not groups:
        raise SpecError(FIELD, groups, "a mapping of groups, each with a 'weights' scheme")
    default, named = None, []
    for key, group in groups.items():
        fmt = _group_format(key, group)
        targets = group.get("targets") or []
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise SpecError(f"{FIELD}.{key}.targets", targets, "a list of module names")
        for target in targets:
            if target == "Linear":
                default = default or fmt
            else:
                named.append((target, fmt))
    ignore = qc.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(t, str) for t in ignore):
        raise SpecError("quantization_config.ignore", ignore, "a list of module names")
    main = default or min((fmt for _, fmt in named), key=lambda fmt: fmt.bits)
    quant = replace(main, module_formats=tuple(named), unlisted_dense=default is None,
                    modules_not_converted=tuple(ignore), patterns="exact",
                    quantizes_lm_head=default is not None, producer="compressed-tensors")
    return _sparse(quant, qc.get("sparsity_config"))


def _group_format(key: str, group: Any) -> Quant:
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict):
        raise SpecError(f"{FIELD}.{key}", group, "a config group with a 'weights' scheme")
    bits, kind = weights.get("num_bits", 0), str(weights.get("type", "int"))
    strategy = str(weights.get("strategy", "tensor"))
    acts = group.get("input_activations")
    static = isinstance(acts, dict) and not acts.get("dynamic", True)
    if kind == "float" and bits == 4 and strategy == "tensor_group":
        return Quant("nvfp4", 4, "microblock", group_size=int(weights.get("group_size") or 16),
                     scale_bits=8, per_tensor_scale=True, input_scale=acts is not None,
                     label="nvfp4" if acts is not None else "nvfp4 (w4a16)")
    if kind == "float" and bits == 8:
        return replace(_fp8(weights, strategy), input_scale=static)
    if kind == "int" and bits in (4, 8):
        return replace(_int(weights, bits, strategy, acts), input_scale=static)
    raise SpecError(f"{FIELD}.{key}.weights", {"num_bits": bits, "type": kind,
                                               "strategy": strategy},
                    "understood: float 8 (tensor, channel, block), int 4/8 (group, channel), "
                    "float 4 tensor_group (NVFP4)")


def _fp8(weights: dict[str, Any], strategy: str) -> Quant:
    if strategy == "block":
        rows, cols = weights.get("block_structure") or (128, 128)
        return Quant("fp8", 8, "block", scale_bits=32, block_shape=(int(rows), int(cols)),
                     label="fp8 (blocks)")
    granularity = "channel" if strategy == "channel" else "tensor"
    return Quant("fp8", 8, granularity, scale_bits=32,
                 label="fp8" if granularity == "tensor" else "fp8 (per channel)")


def _int(weights: dict[str, Any], bits: int, strategy: str, acts: Any) -> Quant:
    """w4a16 / w8a16 ('pack-quantized': int32-packed values, a weight_shape each) and w8a8
    int8 (activations quantized too: stored unpacked)."""
    zero = not weights.get("symmetric", True)
    packed = acts is None
    label = f"w{bits}a16" if packed else f"w{bits}a8 (int)"
    if strategy == "group":
        return Quant(f"int{bits}", bits, "group", group_size=int(weights.get("group_size") or 128),
                     zero_point=zero, label=f"{label} g{weights.get('group_size') or 128}",
                     extra_bits_per_matrix=SHAPE_BITS if packed else 0)
    return Quant(f"int{bits}", bits, "channel", label=label,
                 extra_bits_per_matrix=SHAPE_BITS if packed else 0)


def _sparse(quant: Quant, sparsity: Any) -> Quant:
    """A 2:4 sparsity_config stored with the sparse-24-bitmask compressor: half of each
    matrix's values and a one-bit mask per element, on every quantized format."""
    if not sparsity:
        return quant
    fmt = str(sparsity.get("format", "")) if isinstance(sparsity, dict) else ""
    structure = str(sparsity.get("sparsity_structure", "")) if isinstance(sparsity, dict) else ""
    if fmt != "sparse-24-bitmask" or structure != "2:4":
        raise SpecError("quantization_config.sparsity_config", {"format": fmt,
                                                                "sparsity_structure": structure},
                        "understood: format sparse-24-bitmask, sparsity_structure 2:4")
    def sparse(fmt: Quant) -> Quant:  # + the compressor's int64 (2,) shape per matrix
        return replace(fmt, sparse_24=True, label=f"{fmt.name}, 2:4",
                       extra_bits_per_matrix=fmt.extra_bits_per_matrix or SHAPE_BITS)
    rules = tuple((p, sparse(f)) for p, f in quant.module_formats)
    return replace(sparse(quant), module_formats=rules)
