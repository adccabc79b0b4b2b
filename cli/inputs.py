"""Build the frozen ServeSpec from flags and a model file's serving defaults (flags win)."""

from dataclasses import dataclass, replace

from servecap.ledger import dtypes
from servecap.ledger.devices import resolve_device
from servecap.ledger.errors import SpecError
from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    ServeSpec,
)
from servecap.ledger.units import parse_fraction_or_size, parse_size_flag
from servecap.ledger.weights import default_quant
from servecap.model_configs import LoadedModel


@dataclass(frozen=True)
class PlanFlags:
    """The plan flags as typed; None means 'not given on the command line'."""

    device: str | None = None
    context: int | None = None
    concurrency: int | None = None
    lengths: str | None = None
    runtime_peak: str | None = None
    safety: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    activation_dtype: str | None = None
    block_size: int | None = None
    shared_prefix: int = 0
    group_size: int = 128
    max_num_batched_tokens: int | None = None  # None: 8192, or the vLLM release's default
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS


def serve_spec(flags: PlanFlags, loaded: LoadedModel) -> ServeSpec:
    """Flags override the model file's serving defaults; what neither gives is vLLM's default."""
    defaults = loaded.serving
    device_text = flags.device or defaults.device
    if device_text is None:
        raise SpecError("--device", None, "required: a catalog name (servecap devices) or a size "
                        "like 40GiB")
    device_bytes, label = resolve_device(device_text, _field(flags.device, "device", loaded))
    lengths = _lengths(flags)
    if not lengths and flags.context is not None and flags.shared_prefix > flags.context:
        raise SpecError("--shared-prefix", flags.shared_prefix, f"at most the request's "
                        f"{flags.context:,} tokens: a prefix is part of the request")
    context = _first(flags.context, defaults.context, loaded.spec.max_position_embeddings or None)
    if context is None and not lengths:
        raise SpecError("--context", None, "required: this model states no "
                        "max_position_embeddings to default to")
    runtime = _first(flags.runtime_peak, defaults.runtime_peak)
    safety_text = _first(flags.safety, defaults.safety)
    safety, fraction = (parse_fraction_or_size(safety_text, device_bytes,
                                               _field(flags.safety, "safety", loaded))
                        if safety_text is not None else (None, None))
    spec = ServeSpec(
        device_bytes=device_bytes, context_tokens=max(lengths) if lengths else context,
        concurrency=len(lengths) if lengths else _first(flags.concurrency, defaults.concurrency, 1),
        lengths=lengths,
        block_size_tokens=_first(flags.block_size, defaults.block_size,
                                 DEFAULT_BLOCK_SIZE_TOKENS),
        shared_prefix_tokens=flags.shared_prefix,
        runtime_peak_bytes=None if runtime is None else parse_size_flag(
            runtime, _field(flags.runtime_peak, "runtime_peak", loaded)),
        safety_bytes=safety, safety_fraction=fraction,
        weight_dtype=_dtype(flags.weight_dtype, loaded, "--weight-dtype", dtypes.WEIGHT_DTYPES),
        kv_dtype=_dtype(flags.kv_dtype, loaded, "--kv-dtype", dtypes.KV_DTYPES),
        activation_dtype=_dtype(flags.activation_dtype, loaded, "--activation-dtype",
                                dtypes.ACTIVATION_DTYPES),
        max_num_batched_tokens=flags.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
        max_num_seqs=flags.max_num_seqs,
        device_label=label)
    return spec


def _field(flag: str | None, key: str, loaded: LoadedModel) -> str:
    """Name a bad value where it came from: the flag, or the model file's serving defaults."""
    if flag is not None:
        return "--" + key.replace("_", "-")
    return f"{loaded.path.name}: serving.{key}"


def model_for_flags(flags: PlanFlags, loaded: LoadedModel):
    """An explicit --weight-dtype replaces the checkpoint's own quantization."""
    if flags.weight_dtype is None:
        return loaded.spec
    name = dtypes.lookup(flags.weight_dtype, "--weight-dtype", dtypes.WEIGHT_DTYPES).name
    return replace(loaded.spec, quant=default_quant(name, flags.group_size))


def _first(*values):
    """The first value that was given (0 counts as given, so it can be rejected as 0)."""
    return next((v for v in values if v is not None), None)


def _dtype(flag: str | None, loaded: LoadedModel, field: str, allowed: tuple[str, ...]) -> str:
    if flag is not None:
        return dtypes.lookup(flag, field, allowed).name
    spec = loaded.spec
    if field == "--weight-dtype" and spec.quant is not None:
        return {"fp8": "fp8", "int8": "int8"}.get(spec.quant.method, _quant_dtype(spec.quant))
    checkpoint = dtypes.lookup(spec.checkpoint_dtype, "torch_dtype", dtypes.WEIGHT_DTYPES).name
    return checkpoint if checkpoint in allowed else "bf16"


def _quant_dtype(quant) -> str:
    return "fp4" if quant.method in ("mxfp4", "nvfp4") else "int4" if quant.bits == 4 else "int8"


def _lengths(flags: PlanFlags) -> tuple[int, ...]:
    """17,33,65 -> (17, 33, 65). Every entry a whole number >= 1; a mixed batch replaces
    context x concurrency, so giving those too is a conflict, not a silent override."""
    text = flags.lengths
    if text is None:
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(_is_count(part) for part in parts) or min(int(p) for p in parts) < 1:
        raise SpecError("--lengths", text, "comma-separated token counts, each >= 1, "
                        "e.g. 17,33,65")
    for name, value in (("--context", flags.context), ("--concurrency", flags.concurrency)):
        if value is not None:
            raise SpecError(name, value, "give either --lengths or --context/--concurrency: "
                            "the lengths already set both")
    return tuple(int(part) for part in parts)


def _is_count(text: str) -> bool:
    """ASCII digits only ('²'.isdigit() is True), and few enough to be a token count."""
    return text.isascii() and text.isdigit() and len(text) <= 18
