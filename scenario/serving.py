"""A Scenario's ServeSpec: the device, the resident load, the dtypes and the declared lines,
the Scenario's values first, then the model file's serving defaults, then vLLM's defaults."""

from dataclasses import replace

from servecap.ledger import dtypes
from servecap.ledger.devices import INTERCONNECTS, resolve_device
from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.paging import check_shared_prefix
from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    MAX_CONCURRENCY,
    ServeSpec,
    check_count,
)
from servecap.ledger.units import parse_fraction_or_size, parse_size_flag
from servecap.ledger.weights import default_quant
from servecap.model_configs import LoadedModel

from .eplb import eplb_spec
from .kv_offload import offload_spec
from .lora import lora_spec
from .multimodal import encoder_spec
from .spec import Scenario


def serve_spec(scenario: Scenario, loaded: LoadedModel) -> ServeSpec:
    """The scenario overrides the model file's serving defaults; what neither gives is vLLM's
    default. Errors name the flag a value would be given with (--context for
    scheduler.max_model_len), or the model file's serving key it came from."""
    defaults, sched, mem, load = loaded.serving, scenario.scheduler, scenario.memory, \
        scenario.load
    device_text = scenario.device.name or defaults.device
    if device_text is None:
        raise SpecError("--device", None, "required: a catalog name (servecap devices) or a size "
                        "like 40GiB")
    device_bytes, label = resolve_device(str(device_text),
                                         _field(scenario.device.name, "device", loaded))
    lengths = live_lengths(scenario)
    context = None if lengths else request_context(scenario, loaded)
    runtime = _first(mem.runtime_peak, defaults.runtime_peak)
    activation = _dtype(scenario.dtypes.activation_dtype or model_dtype(scenario), loaded,
                        "--activation-dtype", dtypes.ACTIVATION_DTYPES)
    safety_text = _first(mem.safety, defaults.safety)
    safety, fraction = (parse_fraction_or_size(str(safety_text), device_bytes,
                                               _field(mem.safety, "safety", loaded))
                        if safety_text is not None else (None, None))
    _check_counts(scenario, loaded)
    return ServeSpec(
        device_bytes=device_bytes, context_tokens=max(lengths) if lengths else context,
        concurrency=len(lengths) if lengths else _first(load.concurrency, defaults.concurrency, 1),
        lengths=lengths,
        block_size_tokens=_first(sched.block_size, defaults.block_size,
                                 DEFAULT_BLOCK_SIZE_TOKENS),
        shared_prefix_tokens=load.shared_prefix,
        runtime_peak_bytes=None if runtime is None else parse_size_flag(
            str(runtime), _field(mem.runtime_peak, "runtime_peak", loaded)),
        safety_bytes=safety, safety_fraction=fraction,
        weight_dtype=_dtype(weight_dtype_asked(scenario, loaded), loaded, "--weight-dtype",
                            dtypes.WEIGHT_DTYPES),
        kv_dtype=_dtype(_kv(scenario.dtypes.kv_cache_dtype) or model_dtype(scenario), loaded,
                        "--kv-dtype", dtypes.KV_DTYPES),
        activation_dtype=activation, lora=lora_spec(scenario, activation),
        eplb=eplb_spec(scenario), kv_offload=offload_spec(scenario, loaded.spec),
        encoder=encoder_spec(scenario),
        max_num_batched_tokens=_first(sched.max_num_batched_tokens,
                                      DEFAULT_MAX_NUM_BATCHED_TOKENS),
        max_num_seqs=_first(sched.max_num_seqs, DEFAULT_MAX_NUM_SEQS),
        device_label=label, interconnect=interconnect(scenario),
        gpus_per_node=gpus_per_node(scenario))


def _check_counts(scenario: Scenario, loaded: LoadedModel) -> None:
    """The counts a flag or the model file's serving defaults give, each a whole number >= 1,
    the error naming the flag (--concurrency) or the serving key, as request_context does
    for --context; ServeSpec checks them again by field, for callers without flags."""
    defaults, sched = loaded.serving, scenario.scheduler
    for key, given, default, unit in (
            ("concurrency", scenario.load.concurrency, defaults.concurrency,
             "resident requests"),
            ("block_size", sched.block_size, defaults.block_size, "tokens per block"),
            ("max_num_batched_tokens", sched.max_num_batched_tokens, None, "tokens"),
            ("max_num_seqs", sched.max_num_seqs, None, "sequences per step")):
        value = _first(given, default)
        if value is not None:
            check_count(_field(given, key, loaded), value, unit)
        if key == "concurrency" and value is not None and value > MAX_CONCURRENCY:
            raise SpecError(_field(given, key, loaded), value, f"at most {MAX_CONCURRENCY:,} "
                            "resident requests on one device")


def interconnect(scenario: Scenario) -> str | None:
    """--interconnect pcie|nvlink as given (None: the catalog device's)."""
    link = scenario.device.interconnect
    if link is not None and link.strip().lower() not in INTERCONNECTS:
        raise SpecError("--interconnect", link, " or ".join(INTERCONNECTS))
    return None if link is None else link.strip().lower()


def gpus_per_node(scenario: Scenario) -> int | None:
    """tp x pp / nnodes, the ranks one node holds (None: one node); vLLM requires nnodes to
    divide the world size (vllm/engine/arg_utils.py: world_size % nnodes == 0)."""
    par = scenario.parallel
    world = par.tensor_parallel_size * par.pipeline_parallel_size
    if par.nnodes == 1:
        return None
    if world % par.nnodes:
        raise SpecError("--nnodes", par.nnodes, f"a divisor of tp x pp = {world} (vLLM "
                        "places the same number of ranks on every node)")
    return world // par.nnodes


def request_context(scenario: Scenario, loaded: LoadedModel) -> int:
    """The tokens planned per request: --context, else the model file's serving.context,
    else the model's max_position_embeddings; a whole number >= 1 (the error names where it
    came from), and at least the shared prefix, wherever the context came from."""
    given, defaults = scenario.scheduler.max_model_len, loaded.serving
    context = _first(given, defaults.context, loaded.spec.max_position_embeddings or None)
    if context is None:
        raise SpecError("--context", None, "required: this model states no "
                        "max_position_embeddings to default to")
    where = _field(given, "context", loaded) if given is not None or \
        defaults.context is not None else "max_position_embeddings"
    check_count(where, context, "tokens per request")
    prefix = scenario.load.shared_prefix
    check_shared_prefix((), prefix)  # >= 0, named --shared-prefix
    if prefix > context:
        whence = "" if given is not None else f" ({where}; set --context)"
        raise SpecError("--shared-prefix", prefix, f"at most the request's {context:,} "
                        f"tokens{whence}: a prefix is part of the request")
    return context


def assumed_load(scenario: Scenario, loaded: LoadedModel, serve: ServeSpec) -> str | None:
    """The note a plan carries when no context was given (flag, scenario or the model file's
    serving defaults) and the model's max_position_embeddings stood in, as it does for vLLM's
    --max-model-len: a long-context model planned at 131,072 tokens per request; None when
    one was given or the load is --lengths."""
    if serve.lengths or scenario.scheduler.max_model_len is not None or \
            loaded.serving.context is not None:
        return None
    return (f"--context (max_model_len) not given: {serve.context_tokens:,} tokens assumed, "
            "the model's max_position_embeddings, as vLLM defaults --max-model-len")


def model_dtype(scenario: Scenario) -> str | None:
    """The model dtype asked for (vLLM's --dtype; None or auto: the checkpoint's). In vLLM it
    is the dtype of the weights and activations (vllm/config/model.py@18ec662 ModelConfig.dtype:
    'Data type for model weights and activations'; ModelConfig.quantization: with no
    quantization_config 'we assume the model weights are not quantized and use `dtype` to
    determine the data type of the weights'), and a KV cache left at auto follows it
    (vllm/config/cache.py@c1d8642 CacheConfig.cache_dtype: 'If "auto", will use model data
    type'). SGLang's --dtype and TensorRT-LLM's dtype mean the same."""
    given = scenario.dtypes.dtype
    if given is None or str(given).strip().lower() == "auto":
        return None
    return dtypes.lookup(given, "dtypes.dtype", dtypes.MODEL_DTYPES).name


def weight_dtype_asked(scenario: Scenario, loaded: LoadedModel) -> str | None:
    """The weights' dtype asked for, None for the checkpoint's: --weight-dtype, else the model
    dtype where it differs from an unquantized checkpoint's. A quantized checkpoint keeps its
    own weights under any --dtype (its activations and KV cache still follow it; vLLM refuses
    a dtype the method's kernels do not take: vllm/config/vllm.py@09f030e
    VllmConfig._get_quantization_config, get_supported_act_dtypes)."""
    wanted = scenario.dtypes.weight_dtype
    if wanted is not None:
        return wanted
    model = model_dtype(scenario)
    if model is None or loaded.spec.quant is not None or \
            model == checkpoint_dtype(loaded, "torch_dtype", dtypes.WEIGHT_DTYPES):
        return None
    return model


def model_spec(scenario: Scenario, loaded: LoadedModel) -> ModelSpec:
    """An explicit weight dtype (or a model dtype other than the checkpoint's) replaces the
    checkpoint's own representation."""
    if scenario.dtypes.group_size < 0:  # named by its flag, whether or not int4 reads it
        raise SpecError("--group-size", scenario.dtypes.group_size, "a whole number >= 1 "
                        "(0: per channel)")
    wanted = weight_dtype_asked(scenario, loaded)
    if wanted is None:
        return loaded.spec
    name = dtypes.lookup(wanted, "--weight-dtype", dtypes.WEIGHT_DTYPES).name
    return replace(loaded.spec, quant=default_quant(name, scenario.dtypes.group_size))


def live_lengths(scenario: Scenario) -> tuple[int, ...]:
    """A mixed batch of live lengths replaces max_model_len x concurrency, so giving those too
    is a conflict, not a silent override."""
    lengths = scenario.load.lengths or ()
    if not lengths:
        return ()
    if min(lengths) < 1:
        raise SpecError("--lengths", ",".join(map(str, lengths)), "comma-separated token "
                        "counts, each >= 1, e.g. 17,33,65")
    for name, value in (("--context", scenario.scheduler.max_model_len),
                        ("--concurrency", scenario.load.concurrency)):
        if value is not None:
            raise SpecError(name, value, "give either --lengths or --context/--concurrency: "
                            "the lengths already set both")
    check_shared_prefix(lengths, scenario.load.shared_prefix, what="of --lengths")
    return tuple(lengths)


def checkpoint_dtype(loaded: LoadedModel, field: str, allowed: tuple[str, ...]) -> str:
    """The dtype a checkpoint is planned at when none is asked for."""
    return _dtype(None, loaded, field, allowed)


def _field(given, key: str, loaded: LoadedModel) -> str:
    """Name a bad value where it came from: the flag, or the model file's serving defaults."""
    if given is not None:
        return "--" + key.replace("_", "-")
    return f"{loaded.path.name}: serving.{key}"


def _first(*values):
    """The first value that was given (0 counts as given, so it can be rejected as 0)."""
    return next((v for v in values if v is not None), None)


def _dtype(given: str | None, loaded: LoadedModel, field: str, allowed: tuple[str, ...]) -> str:
    if given is not None:
        return dtypes.lookup(given, field, allowed).name
    spec = loaded.spec
    if field == "--weight-dtype" and spec.quant is not None:
        return {"fp8": "fp8", "int8": "int8"}.get(spec.quant.method, _quant_dtype(spec.quant))
    checkpoint = dtypes.lookup(spec.checkpoint_dtype, "torch_dtype", dtypes.WEIGHT_DTYPES).name
    return checkpoint if checkpoint in allowed else "bf16"


def _kv(given: str | None) -> str | None:
    """--kv-cache-dtype auto (vLLM's default) is no KV dtype of its own: the model dtype's."""
    return dtypes.or_auto(given, None)


def _quant_dtype(quant) -> str:
    return "fp4" if quant.method in ("mxfp4", "nvfp4") else "int4" if quant.bits == 4 else "int8"
