"""A checkpoint's quantization where config.json does not hold it: modelopt's separate
hf_quant_config.json, read as vLLM reads it when config.json has no quantization_config
(vllm/transformers_utils/config.py get_config @v0.32.0: 'ModelOpt 0.29.0 and before saves
the quantization config in a separate hf_quant_config.json')."""

from pathlib import Path

from servecap.ledger.errors import SpecError

from .reading import parse_json, read_text

MODELOPT_FILE = "hf_quant_config.json"


def with_quant_file(data: dict, directory: Path) -> tuple[dict, tuple[str, ...]]:
    """config.json's fields, with the directory's hf_quant_config.json as its
    quantization_config when it states none (text_config's counts as stated)."""
    text = data.get("text_config")
    stated = data.get("quantization_config") is not None or (
        isinstance(text, dict) and text.get("quantization_config") is not None)
    path = directory / MODELOPT_FILE
    if stated or not path.is_file():
        return data, ()
    try:
        quant = parse_json(read_text(path))
    except SpecError as exc:
        raise exc.at(str(path)) from None
    if not isinstance(quant, dict) or not isinstance(quant.get("quantization"), dict):
        raise SpecError("quantization", str(path), "an object {\"quantization\": {\"quant_algo\""
                        ": ...}} as modelopt writes it")
    return {**data, "quantization_config": quant}, (
        f"quantization read from {MODELOPT_FILE} (config.json states none), as vLLM reads it",)
