"""The plan's weights: the format they are planned in, a rank's bytes (its inventory, or its
share of a whole-checkpoint figure), the metadata line's text, and the three representations."""

from dataclasses import dataclass

from . import dtypes
from .errors import SpecError
from .kv import Shard
from .model import ModelSpec, Quant
from .serve import ServeSpec
from .sharding import Stage, rank_inventory
from .weights import WeightBytes, default_quant, metadata_text, weight_bytes


@dataclass(frozen=True)
class Overrides:
    """Ledger lines replaced by a measured or file-derived value (e.g. safetensors headers).
    per_device: the value is one device's (measured); else it is the whole checkpoint's and a
    rank takes its share of it."""

    weights: WeightBytes | None = None
    weights_source: str = ""
    quant: Quant | None = None
    per_device: bool = False


NO_OVERRIDES = Overrides()  # every line from the model and the deployment


def weight_format(spec: ModelSpec, serve: ServeSpec,
                  overrides: Overrides = NO_OVERRIDES) -> tuple[int, Quant | None]:
    """(bits of the unquantized tensors, the quantization) the weights line plans with."""
    dense = dtypes.lookup(serve.activation_dtype, "activation_dtype", dtypes.ACTIVATION_DTYPES)
    wdtype = dtypes.lookup(serve.weight_dtype, "weight_dtype", dtypes.WEIGHT_DTYPES)
    quant = overrides.quant or spec.quant or default_quant(wdtype.name)
    return (wdtype.bits if quant is None else dense.bits), quant


def rank_weights(spec: ModelSpec, serve: ServeSpec, overrides: Overrides,
             shard: Shard) -> tuple[WeightBytes, str]:
    whole = shard.is_whole(spec)
    if overrides.weights is not None and (whole or overrides.per_device):
        return overrides.weights, overrides.weights_source
    dense_bits, quant = weight_format(spec, serve, overrides)
    if whole:
        result = weight_bytes(spec, dense_bits, quant)
        return result, result.how
    if not spec.has_architecture:
        flag, value = (("--tensor-parallel-size", shard.tensor_parallel_size)
                       if shard.tensor_parallel_size > 1 else
                       ("--pipeline-parallel-size", "> 1"))
        raise SpecError(flag, value, f"{spec.name} states no architecture (hidden_size, "
                        "vocab_size) to split across devices; only 1 is allowed")
    stage = Stage(0, shard.layer_ids(spec), shard.first_stage, shard.last_stage)
    groups = rank_inventory(spec, shard.tensor_parallel_size, stage, shard.experts)
    result = weight_bytes(spec, dense_bits, quant, groups)
    if overrides.weights is None:
        return result, result.how
    return _share(overrides, result, weight_bytes(spec, dense_bits, quant))


def _share(overrides: Overrides, rank: WeightBytes, whole: WeightBytes) -> tuple[WeightBytes, str]:
    """A whole-checkpoint figure split in the proportion the inventory gives this rank."""
    file = overrides.weights
    num = rank.param_bytes + rank.metadata_bytes
    den = max(whole.param_bytes + whole.metadata_bytes, 1)
    scaled = WeightBytes(file.param_bytes * num // den, file.metadata_bytes * num // den,
                         rank.num_parameters, rank.quantized_parameters, "")
    return scaled, f"{overrides.weights_source}, this rank's {num / den:.2%} share"


def metadata_from(weights: WeightBytes, overrides: Overrides) -> str:
    if overrides.weights is not None:
        if not weights.metadata_bytes or not weights.by_format:
            return overrides.weights_source
        return f"{overrides.weights_source.split(':')[0]}: {metadata_text(weights)}"
    return "none: unquantized" if not weights.metadata_bytes else metadata_text(weights)


def representations(serve: ServeSpec, weights: WeightBytes, kv_bits: int):
    """Three separate rows so a regression traces to the representation that changed."""
    act = dtypes.lookup(serve.activation_dtype, "activation_dtype", dtypes.ACTIVATION_DTYPES)
    return (
        ("weights", serve.weight_dtype, dtypes.lookup(serve.weight_dtype, "weight_dtype").bits,
         "fixed replica line: parameters and their metadata"),
        ("activations", serve.activation_dtype, act.bits,
         "transient runtime peak and unquantized tensors"),
        ("kv cache", serve.kv_dtype, kv_bits, "bytes per live token: moves the ceiling directly"),
    )
