"""Which storage format each checkpoint module is in: excluded modules stay dense, per-module
rules (modelopt quantized_layers, compressed-tensors config groups) pick theirs, the rest take
the checkpoint's own format (or stay dense where only listed modules are quantized)."""

import re
from fnmatch import fnmatch

from .arch import HEAD, LINEAR
from .model import Quant
from .module_paths import ModuleTensor

# Leading names a pattern may carry that the ledger's paths leave out ('model.language_model.'
# in a multimodal wrapper, 'backbone.' in Nemotron-H, 'language_model.model.' in Kimi's).
PREFIXES = ("model.language_model.", "language_model.model.", "model.model.",
            "language_model.", "backbone.", "model.", "transformer.")
_RESOLVERS: dict[int, tuple[Quant, "Resolver"]] = {}


def normalize(pattern: str) -> str:
    """'model.language_model.layers.0.self_attn*' -> 'layers.0.self_attn*'."""
    text = str(pattern).strip()
    for prefix in PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def matches(path: str, pattern: str, style: str) -> bool:
    """style 'glob': modelopt (exact, dotted substring or fnmatch wildcard, vLLM's
    ModelOptQuantConfigBase.is_layer_excluded @v0.32.0); 'exact': compressed-tensors (the name
    or 're:' regex); 'segment': AWQ/GPTQ/fp8 names (a whole dotted part of the path:
    'gate' names mlp.gate, not gate_proj). A wildcard globs in either of the two last."""
    if pattern.startswith("re:"):
        regex = pattern[3:]
        return re.match(regex, path) is not None or re.match(regex, "model." + path) is not None
    pat = normalize(pattern)
    if not pat:
        return False
    if style == "exact":
        return path == pat or path.startswith(pat + ".")
    dotted = f".{path}."
    if f".{pat}." in dotted:
        return True
    return any(c in pat for c in "*?[") and (
        fnmatch(path, pat) or fnmatch(path, pat + ".*"))


class Resolver:
    """One checkpoint's rules, with each path's answer kept (a plan asks many times)."""

    def __init__(self, quant: Quant) -> None:
        self.quant = quant
        self.exact: dict[str, Quant] = {}
        self.other: list[tuple[str, Quant]] = []
        for pattern, fmt in quant.module_formats:
            if not pattern.startswith("re:") and not any(c in pattern for c in "*?["):
                self.exact.setdefault(normalize(pattern), fmt)
            else:
                self.other.append((pattern, fmt))
        self.cache: dict[tuple[str, str], Quant | None] = {}

    def format_of(self, tensor: ModuleTensor) -> Quant | None:
        """The module's format, None when it is stored dense."""
        key = (tensor.path, tensor.kind)
        if key not in self.cache:
            self.cache[key] = self._resolve(tensor)
        return self.cache[key]

    def _resolve(self, tensor: ModuleTensor) -> Quant | None:
        q = self.quant
        if tensor.kind not in (LINEAR, HEAD):
            return None
        if any(matches(tensor.path, p, q.patterns) for p in q.modules_not_converted if p):
            return None
        listed = self._listed(tensor.path)
        if listed is not None:
            return listed
        if q.unlisted_dense or (tensor.kind == HEAD and not q.quantizes_lm_head):
            return None
        return q

    def _listed(self, path: str) -> Quant | None:
        parts = path.split(".")
        for end in range(len(parts), 0, -1):  # the module, then the modules holding it
            found = self.exact.get(".".join(parts[:end]))
            if found is not None:
                return found
        return next((fmt for pattern, fmt in self.other
                     if matches(path, pattern, self.quant.patterns)), None)


def resolver(quant: Quant) -> Resolver:
    """The checkpoint's resolver, built once per Quant."""
    held = _RESOLVERS.get(id(quant))
    if held is None or held[0] is not quant:
        if len(_RESOLVERS) > 16:
            _RESOLVERS.clear()
        held = (quant, Resolver(quant))
        _RESOLVERS[id(quant)] = held
    return held[1]
