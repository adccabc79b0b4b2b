"""Decoder weights: seeded random values in the planned dtype, or a local safetensors directory."""

import json
from pathlib import Path

import torch

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec

from .expert_weights import fold_experts
from .model import DEFAULT_OPTIONS, FFN_NAMES, INIT_STD, Decoder, DecoderOptions, torch_dtype
from .moe import moe_options
from .parallel import SINGLE, TensorParallel, shard
from .rope import rope_from_config


def _empty(spec: ModelSpec, dtype: str, device: str | torch.device,
           opts: DecoderOptions, tp: TensorParallel = SINGLE) -> Decoder:
    """Build on the meta device, then allocate each tensor once, directly in its dtype."""
    with torch.device("meta"):
        model = Decoder(spec, opts, tp)
    model = model.to(dtype=torch_dtype(dtype))
    return model.to_empty(device=device).eval().requires_grad_(False)


def random_decoder(spec: ModelSpec, dtype: str = "bf16", device: str | torch.device = "cpu",
                   seed: int = 0, opts: DecoderOptions = DEFAULT_OPTIONS,
                   tp: TensorParallel = SINGLE) -> Decoder:
    """N(0, 0.02) matrices and biases, unit norms; the same seed gives the same weights, and
    each tensor-parallel rank holds its slice of exactly those weights."""
    model = _empty(spec, dtype, device, opts, tp)
    generator = torch.Generator(device=model.device).manual_seed(seed)
    full_shapes = _full_shapes(spec, opts) if tp.size > 1 else {}
    norms = {f"{name}.weight" for name, module in model.named_modules()
             if hasattr(module, "unit_weight")}
    with torch.no_grad():
        for name, module in model.named_modules():
            if f"{name}.weight" in norms:
                module.weight.fill_(module.unit_weight)
        for name, param in model.named_parameters():
            if name not in norms:
                full = torch.randn(full_shapes.get(name, param.shape), generator=generator,
                                   device=model.device)
                param.copy_(shard(name, full, spec, tp) * INIT_STD)
    return model


def _full_shapes(spec: ModelSpec, opts: DecoderOptions) -> dict[str, torch.Size]:
    with torch.device("meta"):
        return {name: p.shape for name, p in Decoder(spec, opts).named_parameters()}


# model types whose transformers class rotates part of each head (partial_rotary_factor), with
# the class default when the config omits it
PARTIAL_ROTARY = {"qwen3_next": 0.25}


def decoder_options(directory: Path, model_type: str | None = None) -> DecoderOptions:
    """RoPE (either config format), the norm epsilon (rms_norm_eps; Nemotron-H's
    layer_norm_epsilon), the rotated share of a head, Mamba-2's dt floor, an MoE family's
    routing and expert activation and MLA's RoPE layout from config.json; a RoPE type or key,
    or a routing, the runtime does not implement is refused by name, never ignored."""
    path = directory / "config.json"
    return options_from_config(_read_config(path), str(path), model_type)


def config_options(config_path: str | None, model_type: str | None = None) -> DecoderOptions:
    """The options a model's own config.json states (a config.json, or a directory holding
    one) for seeded random weights; a YAML model's (no config.json) are the defaults."""
    path = Path(config_path) if config_path else None
    if path is not None and path.is_dir():
        path = path / "config.json"
    if path is None or path.suffix != ".json" or not path.is_file():
        return DEFAULT_OPTIONS
    return options_from_config(_read_config(path), str(path), model_type)


def options_from_config(config: dict, where: str, model_type: str | None = None
                        ) -> DecoderOptions:
    """model_type: the family the model loader read (Kimi-K2's kimi_k2 runs as deepseek_v3),
    else config.json's own."""
    defaults = DecoderOptions()
    model_type = model_type or config.get("model_type")
    partial = PARTIAL_ROTARY.get(model_type)
    rope_config = config
    if partial is not None:
        params = dict(config.get("rope_parameters") or {})
        partial = float(params.pop("partial_rotary_factor",
                                   config.get("partial_rotary_factor", partial)))
        rope_config = {k: v for k, v in config.items() if k != "partial_rotary_factor"}
        rope_config["rope_parameters"] = params or None
    eps = config.get("rms_norm_eps", config.get("layer_norm_epsilon", defaults.rms_norm_eps))
    return DecoderOptions(rope_from_config(rope_config, where), float(eps),
                          partial if partial is not None else 1.0,
                          float(config.get("time_step_min", defaults.time_step_min)),
                          moe_options({**config, "model_type": model_type}, where),
                          bool(config.get("rope_interleave", defaults.rope_interleave)))


def _read_config(path: Path) -> dict:
    """The checkpoint's own config.json: without it RoPE and norm constants would be guesses."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError("weights", str(path.parent), "no config.json beside the safetensors "
                        "files (it states rope_theta and rms_norm_eps)") from None
    except (OSError, ValueError):
        raise SpecError("config.json", str(path), "cannot be read as JSON") from None
    if not isinstance(config, dict):
        raise SpecError("config.json", str(path), "must be a JSON object")
    return config


def load_decoder(spec: ModelSpec, directory: str | Path, dtype: str = "bf16",
                 device: str | torch.device = "cpu", tp: TensorParallel = SINGLE) -> Decoder:
    """Real weights from `directory`/*.safetensors (no hub), cast to `dtype`; every tensor the
    architecture needs must be present and no unknown tensor may be left over."""
    directory = Path(directory)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise SpecError("weights", str(directory), "no *.safetensors files in the directory")
    model = _empty(spec, dtype, device, decoder_options(directory, spec.model_type), tp)
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(_read_tensors(path, model.device))
    if spec.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    state = fold_experts(spec, state, model.body_name, FFN_NAMES.get(spec.model_type, "mlp"))
    _check_names(set(state), set(model.state_dict()), directory)
    state = {k: shard(k, v, spec, tp).to(model.dtype) for k, v in state.items()}
    _check_shapes(state, model.state_dict(), directory)
    model.load_state_dict(state, strict=True)
    return model


def _read_tensors(path: Path, device: torch.device) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=str(device))
    except (SafetensorError, OSError) as exc:
        raise SpecError("weights", str(path), f"not a readable safetensors file ({exc})") \
            from None


def _check_shapes(state: dict[str, torch.Tensor], needed: dict[str, torch.Tensor],
                  directory: Path) -> None:
    """A tensor of the wrong shape is the checkpoint disagreeing with its config.json."""
    for name, tensor in state.items():
        if tensor.shape != needed[name].shape:
            raise SpecError("weights", str(directory), f"{name} has shape "
                            f"{tuple(tensor.shape)}; the architecture needs "
                            f"{tuple(needed[name].shape)}")


def _check_names(found: set[str], needed: set[str], directory: Path) -> None:
    if found != needed:
        missing, extra = sorted(needed - found), sorted(found - needed)
        raise SpecError("weights", str(directory), f"tensors do not match the architecture: "
                        f"missing {missing[:3]}, unexpected {extra[:3]}")
