"""Find and load a model: a bundled name, a servecap YAML, a config.json or a model directory."""

from __future__ import annotations

import difflib
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from servecap.ledger.errors import SpecError, document_kind
from servecap.ledger.model import ModelSpec

from .bundled import AsRead
from .hf import to_spec
from .reading import parse_json, parse_yaml, read_text
from .size_check import with_size_checks

if TYPE_CHECKING:  # a bundled YAML needs neither: they load with an id, a directory or a log
    from .hub import HubSource
    from .safetensors_headers import HeaderBytes
    from .schema import Serving  # pydantic: imported where a file is validated

BUNDLED_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    path: Path
    serving: Serving | AsRead  # AsRead: a bundled file's, or none given (_no_serving)
    file_weights: HeaderBytes | None = None
    hub: HubSource | None = None
    ignored_fields: tuple[str, ...] = ()  # config.json fields no ledger line reads (plan -v)


def bundled_models() -> list[Path]:
    return sorted(BUNDLED_DIR.glob("*.yaml"))


def load_model(ref: str) -> LoadedModel:
    """Resolve `ref` and load it; every failure is a SpecError naming the file."""
    if "/" in ref and _is_hub_id(ref) and not Path(ref).expanduser().exists():  # a local
        return with_size_checks(_load_hub(ref))  # org/name directory wins
    path = _resolve(ref)
    try:
        if path.is_dir():
            return with_size_checks(_load_directory(path))
        if path.suffix == ".json":
            return with_size_checks(_load_config_json(path))
        if path.suffix == ".gguf":
            return with_size_checks(_load_gguf(path))
        loaded, total = _load_yaml(path)
        return with_size_checks(loaded, total)
    except SpecError as exc:  # named by the file inside a directory where that is known
        raise (exc if exc.source else exc.at(str(path))) from None


def _resolve(ref: str) -> Path:
    if not ref.strip():  # Path("") is the working directory: never plan it by accident
        raise SpecError("model", ref, "a bundled model name (servecap models), a model YAML, a "
                        "config.json or a model directory")
    path = Path(ref).expanduser()
    if path.exists():
        return path
    bundled = BUNDLED_DIR / f"{ref.lower()}.yaml"
    if bundled.exists():
        return bundled
    stems = [p.stem for p in bundled_models()]
    hint = f"; did you mean {' or '.join(close)}?" if (close := _close_names(ref, stems)) else ""
    raise SpecError("model", ref, f"no such file, directory or bundled model{hint} "
                    f"(bundled: {', '.join(stems)})")


def _close_names(ref: str, stems: list[str]) -> list[str]:
    """Bundled names a mistyped one points to: up to 3 that contain it ('llama-3.2-1b' ->
    llama-3.2-1b-instruct), none when more do, else the one closest in spelling."""
    containing = [s for s in stems if ref.lower() in s]
    if containing:
        return containing if len(containing) <= 3 else []
    return difflib.get_close_matches(ref.lower(), stems, n=1)


def _load_yaml(path: Path) -> tuple[LoadedModel, int | None]:
    text = read_text(path)
    try:
        data = parse_yaml(text)
    except SpecError:
        data = None
        if not looks_like_vllm_log(text):
            raise
    if not (isinstance(data, dict) and "name" in data) and looks_like_vllm_log(text):
        raise SpecError("model", str(path), "this is a vLLM log, not a model file: "
                        "`servecap reconcile LOG` reads it")
    if not isinstance(data, dict):
        raise SpecError("document", document_kind(data), "a model YAML must be a mapping of "
                        "config.json field names to values")
    if path.resolve().parent == BUNDLED_DIR:
        model = _bundled(data)
    else:
        from .schema import ModelFile

        model = _validate(ModelFile, data)
    notes = tuple(model.notes or ())
    spec = to_spec(model, model.name, model.source, model.num_parameters, notes)
    return LoadedModel(spec, path, model.serving or _no_serving()), model.weights_total_size_bytes


def _load_config_json(path: Path, name: str | None = None) -> LoadedModel:
    from .config_read import TOWERS_NOTE, prepare  # a bundled YAML needs none of these
    from .encoders import read_encoder
    from .quant_files import with_quant_file
    from .schema import HFConfig
    from .vision_fields import vision_spec

    data = parse_json(read_text(path), check=False)
    if not isinstance(data, dict):
        raise SpecError("document", document_kind(data), "config.json must be an object")
    data, quant_notes = with_quant_file(data, path.parent)
    raw = data
    kept, ignored, notes = prepare(data)
    encoder, encoder_note = read_encoder(data)
    if encoder is not None:  # the tower is counted: its 'not counted' note gives way
        notes = tuple(n for n in notes if not n.startswith(TOWERS_NOTE)) + (encoder_note,)
    notes = quant_notes + notes
    cfg = _validate(HFConfig, kept)
    label = name or path.parent.name or path.stem
    spec = replace(to_spec(cfg, label, str(path), notes=notes), encoder=encoder)
    try:  # a text-only plan does not need the tower: a field it lacks refuses only mm flags
        spec = replace(spec, vision=vision_spec(raw))
    except SpecError as error:
        spec = replace(spec, notes=spec.notes + (f"vision_config not read for the encoder "
                                                 f"budget: {error.line()}",))
    return LoadedModel(spec, path, _no_serving(), ignored_fields=ignored)


def _load_gguf(path: Path) -> LoadedModel:
    """A llama.cpp GGUF file: the architecture from its metadata, the weights from its tensor
    table (the header alone is read)."""
    from .config_read import prepare
    from .gguf import gguf_weights, read_gguf
    from .gguf_config import config_from
    from .schema import HFConfig

    meta, table = read_gguf(path)
    kept, ignored, notes = prepare(config_from(meta, table, str(path)))
    cfg = _validate(HFConfig, kept)
    note = (f"read from the GGUF header ({len(table):,} tensors; general.name "
            f"{meta.get('general.name', '?')!r}): no tensor was loaded",)
    return LoadedModel(to_spec(cfg, path.stem, str(path), notes=note + notes), path,
                       _no_serving(), gguf_weights(table), ignored_fields=ignored)


def _is_hub_id(ref: str) -> bool:
    from .hub import is_hub_id

    return is_hub_id(ref)


def _load_directory(path: Path) -> LoadedModel:
    from .safetensors_headers import directory_weights

    config = path / "config.json"
    if not config.exists():
        raise SpecError("config.json", str(config), "a model directory needs a config.json")
    try:
        loaded = _load_config_json(config, path.name)
    except SpecError as exc:
        raise (exc if exc.source else exc.at(str(config))) from None
    return LoadedModel(loaded.spec, path, loaded.serving, directory_weights(path),
                       ignored_fields=loaded.ignored_fields)


def _load_hub(ref: str) -> LoadedModel:
    """org/name[@revision] from the Hugging Face Hub, planned as its local directory would be."""
    from .hub import fetch_snapshot

    snap = fetch_snapshot(ref)
    try:
        loaded = _load_config_json(snap.config_path, snap.source.repo_id)
    except SpecError as exc:
        raise exc.at(f"{ref}: config.json") from None
    spec = replace(loaded.spec, source=snap.source.label, notes=loaded.spec.notes + snap.notes)
    return LoadedModel(spec, snap.config_path, _no_serving(), snap.weights, snap.source,
                       loaded.ignored_fields)


def _bundled(data: dict) -> AsRead:
    """A bundled model YAML, shipped with servecap and validated by its tests
    (tests/model_configs/test_loading.py: read, field by field, as the same values of the same
    types as validated): read as it stands, without ModelFile's validator or the pydantic
    models themselves (model_configs/bundled.py). Any other YAML is validated."""
    serving = data.get("serving")
    if isinstance(serving, dict):
        data = {**data, "serving": AsRead(serving)}
    return AsRead(data)


def _no_serving() -> AsRead:
    """A file without deployment defaults: Serving's fields all None, read without Serving's
    validator (there is nothing to validate), which would otherwise be built, plugins looked
    up through every installed package's entry points, for the default alone."""
    return AsRead({})


@contextmanager
def _no_pydantic_plugins():
    """The schemas' validators are built on first use (defer_build); building one outside this
    scope makes pydantic look for plugins through every installed package's entry points, the
    largest cost of a plan after the imports. typer builds its option adapters the same way."""
    previous = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
        else:
            os.environ["PYDANTIC_DISABLE_PLUGINS"] = previous


_LOG_LINE = re.compile(r"^(\(\w+ pid=\d+\) )?(INFO|WARNING|DEBUG|ERROR) \d\d-\d\d "
                       r"\d\d:\d\d:\d\d", re.MULTILINE)


def looks_like_vllm_log(text: str) -> bool:
    """vLLM's log lines start 'INFO 01-01 00:00:00' or '(EngineCore_0 pid=..) INFO ...'; a
    quoted log without the prefixes still holds the figures reconcile reads."""
    if _LOG_LINE.search(text[:20000]):
        return True
    from servecap.ledger.vllm_log import parse_vllm_log

    try:
        parse_vllm_log(text[:200_000])
    except SpecError:
        return False
    return True


# fields that take either of two forms: one message naming both (pydantic would report the
# first member's error alone, e.g. 'LLLG' blamed as "should be a valid integer")
EITHER = {
    "sliding_window_pattern": "a whole number >= 1 (every n-th layer global) or a string of "
                              "L (local: sliding) and G (global) layers, e.g. 'LLLG'",
    "mamba_d_head": "a whole number >= 1 or 'auto'",
    "moe_layer_freq": "a whole number, or one 0 (dense) / 1 (MoE) per layer",
    "gating": "true, false or 'per-head'",
}


def _validate(schema, data: dict):
    from pydantic import ValidationError

    try:
        with _no_pydantic_plugins():
            return schema.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "document"
        value = err.get("input")
        if err["loc"] and err["loc"][0] in EITHER:  # a union's member error blames one type
            raise SpecError(str(err["loc"][0]), value, EITHER[err["loc"][0]]) from None
        if err["type"] == "missing":
            raise SpecError(field, None, "required") from None
        if err["type"] == "extra_forbidden":
            allowed = "unknown key; allowed keys: " + ", ".join(sorted(schema.model_fields))
            raise SpecError(field, value, allowed) from None
        raise SpecError(field, value, err["msg"]) from None
