"""Storage widths of the number formats servecap plans with, in bits per element."""

from dataclasses import dataclass

from .errors import SpecError


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    aliases: tuple[str, ...] = ()


_ALL = (
    DType("fp32", 32, ("float32", "float")),
    DType("bf16", 16, ("bfloat16",)),
    DType("fp16", 16, ("float16", "half")),
    DType("fp8", 8, ("float8", "fp8_e4m3", "fp8_e5m2", "float8_e4m3fn", "e4m3")),
    DType("int8", 8, ("w8", "i8")),
    DType("fp4", 4, ("mxfp4", "nvfp4", "float4")),
    DType("int4", 4, ("w4", "i4", "awq", "gptq")),
)
_BY_NAME = {alias: d for d in _ALL for alias in (d.name, *d.aliases)}
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
ACTIVATION_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
MODEL_DTYPES = ("fp32", "bf16", "fp16")  # an engine's --dtype: float32, bfloat16, float16


def lookup(name: str, field: str, allowed: tuple[str, ...] = WEIGHT_DTYPES) -> DType:
    """A dtype by name or alias ('bfloat16' -> bf16), restricted to `allowed`."""
    dtype = _BY_NAME.get(str(name).strip().lower())
    if dtype is None or dtype.name not in allowed:
        raise SpecError(field, name, "allowed: " + ", ".join(allowed))
    return dtype


def or_auto(name: str | None, model: str | None) -> str | None:
    """vLLM's --kv-cache-dtype auto (its default) is the model dtype: `model`; any other name
    as given."""
    return model if name is not None and str(name).strip().lower() == "auto" else name


def bits_to_bytes(num_bits: int) -> int:
    """Whole bytes needed for `num_bits` (rounded up: storage is addressed in bytes)."""
    return -(-num_bits // 8)
