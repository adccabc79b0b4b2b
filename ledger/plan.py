"""build_plan: the per-device memory ledger and the memory-only concurrency ceiling."""

from dataclasses import dataclass, field, replace

from . import dtypes
from .arch import active_parameters
from .kv import WHOLE, Shard, kv_bytes_by_layer_kind, kv_bytes_per_request, kv_bytes_per_token
from .model import ModelSpec, Quant
from .paging import BlockReport, paging_report
from .runtime_estimate import estimate_runtime_peak
from .serve import DEFAULT_SAFETY_FRACTION, ServeSpec
from .weights import WeightBytes, default_quant, weight_bytes


@dataclass(frozen=True)
class Line:
    """One ledger line: int bytes and the inputs that produced it ('from')."""

    key: str
    label: str
    num_bytes: int
    source: str
    measured: bool = False


@dataclass(frozen=True)
class Plan:
    model: str
    serve: ServeSpec
    lines: tuple[Line, ...]
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    kv_bytes_by_kind: dict[str, int]
    paging: BlockReport
    memory_ceiling_requests: int
    representations: tuple[tuple[str, str, int, str], ...]
    num_parameters: int
    active_parameters: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def line(self, key: str) -> int:
        return next(item.num_bytes for item in self.lines if item.key == key)

    @property
    def device_bytes(self) -> int:
        return self.serve.device_bytes

    @property
    def committed_bytes(self) -> int:
        """Weights + metadata + runtime peak + KV in use + safety: committed plus reserved."""
        return sum(item.num_bytes for item in self.lines)

    @property
    def free_bytes(self) -> int:
        return self.device_bytes - self.committed_bytes

    @property
    def fits(self) -> bool:
        return self.free_bytes >= 0

    @property
    def fixed_bytes(self) -> int:
        """Everything but the KV cache: what the ceiling divides the rest of the device by."""
        return self.committed_bytes - self.line("kv_cache")


@dataclass(frozen=True)
class Overrides:
    """Ledger lines replaced by a measured or file-derived value (e.g. safetensors headers)."""

    weights: WeightBytes | None = None
    weights_source: str = ""
    quant: Quant | None = None


def build_plan(spec: ModelSpec, serve: ServeSpec, overrides: Overrides = Overrides(),
               shard: Shard = WHOLE) -> Plan:
    """The seed's ledger: weights, metadata, runtime peak, KV for the live tokens, safety."""
    kv_bits = dtypes.lookup(serve.kv_dtype, "kv_dtype", dtypes.KV_DTYPES).bits
    weights, weights_from = _weights(spec, serve, overrides)
    runtime, runtime_from = _runtime_peak(spec, serve)
    safety, safety_from = _safety(serve)
    per_token = kv_bytes_per_token(spec, kv_bits, shard)
    bsz = serve.block_size_tokens
    per_request = kv_bytes_per_request(spec, kv_bits, serve.context_tokens, bsz, shard)
    lengths = list(serve.live_lengths)
    kv_total = _kv_total(spec, kv_bits, lengths, serve, shard)
    lines = (
        Line("weights", "weights", weights.param_bytes, weights_from, bool(overrides.weights)),
        Line("weight_metadata", "weight metadata",
             weights.metadata_bytes, _meta_from(weights, overrides)),
        Line("runtime_peak", "runtime peak", runtime, runtime_from),
        Line("kv_cache", "KV cache in use", kv_total, _kv_from(lengths, bsz, serve)),
        Line("safety", "safety reserve", safety, safety_from),
    )
    fixed = sum(item.num_bytes for item in lines) - kv_total
    if serve.lengths:
        per_request = -(-kv_total // len(lengths))
    ceiling = max(0, (serve.device_bytes - fixed) // per_request) if per_request else 0
    return Plan(
        model=spec.name, serve=serve, lines=lines, kv_bytes_per_token=per_token,
        kv_bytes_per_request=per_request,
        kv_bytes_by_kind=kv_bytes_by_layer_kind(spec, kv_bits, serve.context_tokens, bsz, shard),
        paging=paging_report(lengths, bsz, serve.shared_prefix_tokens),
        memory_ceiling_requests=ceiling,
        representations=_representations(serve, weights, kv_bits),
        num_parameters=weights.num_parameters, active_parameters=active_parameters(spec),
        notes=_notes(spec, serve, weights, fixed),
    )


def _weights(spec: ModelSpec, serve: ServeSpec, overrides: Overrides) -> tuple[WeightBytes, str]:
    if overrides.weights is not None:
        return overrides.weights, overrides.weights_source
    dense = dtypes.lookup(serve.activation_dtype, "activation_dtype", dtypes.ACTIVATION_DTYPES)
    wdtype = dtypes.lookup(serve.weight_dtype, "weight_dtype", dtypes.WEIGHT_DTYPES)
    quant = overrides.quant or spec.quant or default_quant(wdtype.name)
    dense_bits = wdtype.bits if quant is None else dense.bits
    result = weight_bytes(spec, dense_bits, quant)
    return result, result.how


def _meta_from(weights: WeightBytes, overrides: Overrides) -> str:
    if overrides.weights is not None:
        return overrides.weights_source
    return "none: unquantized" if not weights.metadata_bytes else "scales/zero points of " + \
        f"{weights.quantized_parameters:,} quantized params"


def _runtime_peak(spec: ModelSpec, serve: ServeSpec) -> tuple[int, str]:
    if serve.runtime_peak_bytes is not None:
        return serve.runtime_peak_bytes, "declared: activations, workspaces, graphs"
    return estimate_runtime_peak(spec, serve)


def _safety(serve: ServeSpec) -> tuple[int, str]:
    if serve.safety_bytes is not None:
        if serve.safety_fraction is not None:
            return serve.safety_bytes, f"declared: {serve.safety_fraction:.0%} of the device"
        return serve.safety_bytes, "declared: deliberate capacity"
    fraction = DEFAULT_SAFETY_FRACTION
    return int(serve.device_bytes * fraction), (
        f"default: {fraction:.0%} of the device (vLLM gpu_memory_utilization=0.90)")


def _kv_total(spec: ModelSpec, kv_bits: int, lengths: list[int], serve: ServeSpec,
              shard: Shard) -> int:
    """Σ_r over live requests, paged; a shared prefix's full blocks are stored once."""
    bsz = serve.block_size_tokens
    total = sum(kv_bytes_per_request(spec, kv_bits, n, bsz, shard) for n in lengths)
    shared_tokens = min([serve.shared_prefix_tokens, *lengths]) // bsz * bsz
    if shared_tokens and len(lengths) > 1:
        full = kv_bytes_by_layer_kind(spec, kv_bits, shared_tokens, bsz, shard)["full"]
        total -= full * (len(lengths) - 1)
    return total


def _kv_from(lengths: list[int], bsz: int, serve: ServeSpec) -> str:
    load = (f"{len(lengths)} x {serve.context_tokens:,} tokens" if not serve.lengths
            else f"Σ of {len(lengths)} lengths = {sum(lengths):,} tokens")
    shared = f", {serve.shared_prefix_tokens:,}-token prefix shared" \
        if serve.shared_prefix_tokens else ""
    return f"{load}, {serve.kv_dtype}, {bsz}-token blocks{shared}"


def _representations(serve: ServeSpec, weights: WeightBytes, kv_bits: int):
    """Three separate rows so a regression traces to the representation that changed."""
    act = dtypes.lookup(serve.activation_dtype, "activation_dtype", dtypes.ACTIVATION_DTYPES)
    return (
        ("weights", serve.weight_dtype, dtypes.lookup(serve.weight_dtype, "weight_dtype").bits,
         "fixed replica line: parameters and their metadata"),
        ("activations", serve.activation_dtype, act.bits,
         "transient runtime peak and unquantized tensors"),
        ("kv cache", serve.kv_dtype, kv_bits, "bytes per live token: moves the ceiling directly"),
    )


def _notes(spec: ModelSpec, serve: ServeSpec, weights: WeightBytes, fixed: int) -> tuple[str, ...]:
    notes = list(spec.notes)
    total_weights = weights.param_bytes + weights.metadata_bytes
    if total_weights > serve.device_bytes:
        notes.append("the weights alone do not fit on this device: memory ceiling 0")
    elif fixed > serve.device_bytes:
        notes.append("weights, runtime peak and safety leave no room for any KV: ceiling 0")
    return tuple(notes)


def with_device(serve: ServeSpec, device_bytes: int) -> ServeSpec:
    """The same deployment on another device size (a declared % safety scales with it)."""
    if serve.safety_fraction is not None:
        return replace(serve, device_bytes=device_bytes,
                       safety_bytes=int(device_bytes * serve.safety_fraction))
    return replace(serve, device_bytes=device_bytes)
