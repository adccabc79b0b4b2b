"""Read a modelopt checkpoint's quantization (NVIDIA TensorRT Model Optimizer): config.json's
quantization_config (quant_method 'modelopt': quant_algo, ignore, quantized_layers) or the
older hf_quant_config.json ({"quantization": {quant_algo, exclude_modules, ...}}), as vLLM's
ModelOptQuantConfigBase.from_config reads both (vllm/model_executor/layers/quantization/
modelopt.py @v0.32.0). Each module's format: excluded ones dense, MIXED_PRECISION's listed
ones their own algo, every other linear the checkpoint's algo."""

from dataclasses import replace
from typing import Any

from servecap.ledger.errors import SpecError
from servecap.ledger.model import Quant

FIELD = "quantization_config.quant_algo"
NVFP4_GROUP = 16  # ModelOptNvFp4Config: group_size defaults to 16


def algo_format(algo: str, group_size: int | None, field: str = FIELD) -> Quant:
    """One modelopt linear algo as stored (LINEAR_ALGOS @v0.32.0): FP8 an e4m3 weight, one
    fp32 weight scale and one static fp32 input scale; FP8_PER_CHANNEL_PER_TOKEN an fp32 scale
    per output row; FP8_PB_WO an fp32 scale per 128 x 128 block; NVFP4 packed e2m1 weights,
    an e4m3 scale per 16, an fp32 weight_scale_2 and (W4A4) an fp32 input_scale; W4A16_NVFP4
    the same without the input scale; MXFP8 e4m3 with an e8m0 scale per 32."""
    upper = str(algo).upper()
    if upper == "FP8":
        return Quant("fp8", 8, "tensor", scale_bits=32, input_scale=True, label="fp8")
    if upper == "FP8_PER_CHANNEL_PER_TOKEN":
        return Quant("fp8", 8, "channel", scale_bits=32, label="fp8 (per channel)")
    if upper in ("FP8_PB_WO", "FP8_BLOCK_SCALES"):
        return Quant("fp8", 8, "block", scale_bits=32, block_shape=(128, 128),
                     label="fp8 (128x128 blocks)")
    if upper in ("NVFP4", "W4A16_NVFP4"):
        return Quant("nvfp4", 4, "microblock", group_size=group_size or NVFP4_GROUP,
                     scale_bits=8, per_tensor_scale=True, input_scale=upper == "NVFP4",
                     label="nvfp4" if upper == "NVFP4" else "nvfp4 (w4a16)")
    if upper == "MXFP8":
        return Quant("mxfp8", 8, "microblock", group_size=32, scale_bits=8, label="mxfp8")
    raise SpecError(field, algo, "modelopt algos servecap stores: FP8, "
                    "FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, W4A16_NVFP4, MXFP8, "
                    "MIXED_PRECISION")


def parse_modelopt(qc: dict[str, Any]) -> Quant:
    """The checkpoint's Quant from either spelling (a dict holding 'quantization' is the
    hf_quant_config.json form)."""
    nested = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else None
    body = nested if nested is not None else qc
    field = "hf_quant_config.json quantization.quant_algo" if nested is not None else FIELD
    algo = body.get("quant_algo")
    if not algo:
        raise SpecError(field, algo, "a modelopt quant_algo (FP8, NVFP4, MIXED_PRECISION, ...)")
    key = "exclude_modules" if nested is not None or "ignore" not in body else "ignore"
    excluded = _names(body.get(key), field.replace("quant_algo", key))
    producer = "modelopt:hf" if nested is not None else f"modelopt:{key}"
    group = _group_size(body.get("group_size"), field)
    if str(algo).upper() == "MIXED_PRECISION":
        return replace(_mixed(body.get("quantized_layers"), excluded, group, field),
                       producer=producer)
    if str(algo).upper() == "NVFP4" and _weights_only(body):
        algo = "W4A16_NVFP4"  # every config group leaves activations unquantized (vLLM too)
    fmt = algo_format(algo, group, field)
    return replace(fmt, modules_not_converted=excluded, patterns="glob",
                   quantizes_lm_head=True, producer=producer)


def _mixed(layers: Any, excluded: tuple[str, ...], group: int | None, field: str) -> Quant:
    """MIXED_PRECISION: each quantized_layers entry its own algo; a linear it does not list is
    left unquantized (ModelOptMixedPrecisionConfig.get_quant_method @v0.32.0)."""
    where = field.replace("quant_algo", "quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise SpecError(where, layers, "a mapping of module name to {quant_algo, ...}: "
                        "MIXED_PRECISION names each quantized module")
    formats: list[tuple[str, Quant]] = []
    for name, recipe in layers.items():
        if not isinstance(recipe, dict):
            raise SpecError(f"{where}.{name}", recipe, "an object with quant_algo")
        size = _group_size(recipe.get("group_size"), f"{where}.{name}") or group
        formats.append((str(name), algo_format(recipe.get("quant_algo"), size,
                                               f"{where}.{name}.quant_algo")))
    main = min((fmt for _, fmt in formats), key=lambda fmt: fmt.bits)
    return replace(main, module_formats=tuple(formats), unlisted_dense=True,
                   modules_not_converted=excluded, patterns="glob", quantizes_lm_head=True,
                   label=f"mixed: {', '.join(sorted({fmt.name for _, fmt in formats}))}")


def _weights_only(body: dict) -> bool:
    groups = body.get("config_groups")
    return isinstance(groups, dict) and bool(groups) and all(
        isinstance(g, dict) and g.get("input_activations") is None for g in groups.values())


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(field, value, "a list of module names or wildcards")
    return tuple(value)


def _group_size(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(field.replace("quant_algo", "group_size"), value, "a whole number >= 1")
    return value
