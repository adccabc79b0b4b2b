"""A Scenario's multimodal knobs (vLLM's --limit-mm-per-prompt, --mm-processor-kwargs,
--mm-encoder-tp-mode, --skip-mm-profiling, and the load's --image-size) as the ledger's
EncoderSpec; None when none is given (a text-only plan)."""

import json
import re

from servecap.ledger.encoder import DEFAULT_LIMIT, EncoderSpec
from servecap.ledger.errors import SpecError

from .spec import Multimodal, Scenario

MODALITIES = ("image", "video", "audio")
_SIZE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def encoder_spec(scenario: Scenario) -> EncoderSpec | None:
    mm = scenario.multimodal
    if mm == Multimodal():
        return None
    chunked = scenario.scheduler.enable_chunked_prefill
    return EncoderSpec(limits=limits(mm.limit_mm_per_prompt),
                       processor_kwargs=processor_kwargs(mm.mm_processor_kwargs),
                       tp_mode=(mm.mm_encoder_tp_mode or "weights").strip().lower(),
                       skip_profiling=mm.skip_mm_profiling,
                       chunked_prefill=True if chunked is None else chunked,
                       image_sizes=image_sizes(mm.image_size))


def limits(text: str | None) -> tuple[tuple[str, int], ...]:
    """'{"image": 2, "video": 0}', '{"image": {"count": 2, ...}}' (vLLM's forms) or the older
    'image=2,video=0'."""
    if text is None:
        return ()
    field = "--limit-mm-per-prompt"
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            raise SpecError(field, text, 'JSON like \'{"image": 2, "video": 0}\'') from None
    else:
        data = {}
        for part in filter(None, (p.strip() for p in stripped.split(","))):
            key, sep, value = part.partition("=")
            if not sep or not value.strip().isdigit():
                raise SpecError(field, text, 'modality=count pairs like image=2,video=0, or '
                                'JSON like \'{"image": 2}\'')
            data[key.strip()] = int(value)
    out = []
    for modality, value in data.items():
        if modality not in MODALITIES:
            raise SpecError(field, modality, "a modality: " + ", ".join(MODALITIES))
        count = value.get("count", DEFAULT_LIMIT) if isinstance(value, dict) else value
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SpecError(f"{field} {modality}", value, "a whole number >= 0, or "
                            '{"count": N, ...}')
        out.append((modality, count))
    return tuple(out)


def processor_kwargs(text: str | None) -> tuple[tuple[str, object], ...]:
    if text is None:
        return ()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise SpecError("--mm-processor-kwargs", text, 'a JSON object, e.g. '
                        '\'{"max_pixels": 1003520}\'')
    return tuple(data.items())


def image_sizes(values: tuple[str, ...] | None) -> tuple[tuple[int, int], ...]:
    """--image-size 1024x768 (repeatable, or comma-separated)."""
    out = []
    for value in values or ():
        for part in filter(None, (p.strip() for p in value.split(","))):
            found = _SIZE.match(part)
            if not found or min(int(found[1]), int(found[2])) < 1:
                raise SpecError("--image-size", part, "WIDTHxHEIGHT in pixels, e.g. 1024x768")
            out.append((int(found[1]), int(found[2])))
    return tuple(out)
