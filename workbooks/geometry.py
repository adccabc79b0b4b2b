"""The KV shapes the workbook's formulas name: one shape per layer kind (KV heads, K and V head
sizes), the layers of each kind that cache (a no-op block or a layer reading another's K and V
caches nothing), and the refusal when layers of one kind differ (the workbook has one cell per
kind; ledger/layer_table.py lists them layer by layer)."""

from dataclasses import dataclass

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ATTENTION_KINDS, FULL, ModelSpec


@dataclass(frozen=True)
class KindShape:
    kv_heads: int
    k_dim: int
    v_dim: int


def caching_layers(spec: ModelSpec, kind: str, layers=None) -> list[int]:
    """The layers of `kind` (among `layers`, default all) that keep their own KV."""
    ids = range(spec.num_layers) if layers is None else layers
    return [n for n in ids if spec.layer_kind(n) == kind and spec.shape_at(n).caches_kv]


def kind_shape(spec: ModelSpec, kind: str) -> KindShape | None:
    """The one KV shape of the caching layers of `kind` (None: no such layer)."""
    found = {_shape(spec, n) for n in caching_layers(spec, kind)}
    if len(found) > 1:
        raise SpecError("workbook", spec.name, f"its {kind} layers cache KV of "
                        f"{len(found)} different shapes; the workbook models one shape per "
                        "layer kind (plan --json lists every layer)")
    return found.pop() if found else None


def _shape(spec: ModelSpec, layer: int) -> KindShape:
    shape = spec.shape_at(layer)
    return KindShape(shape.num_kv_heads, shape.head_dim, shape.v_head_dim)


def default_shape(spec: ModelSpec) -> KindShape:
    """The shape the plain cells hold (num_kv_heads, head_dim, v_head_dim): the windowed
    layers' where the model has them, else the full layers'."""
    att = spec.attention
    for kind in ATTENTION_KINDS[::-1]:  # chunked, sliding, then full
        shape = kind_shape(spec, kind)
        if shape is not None:
            return shape
    return KindShape(att.num_kv_heads, att.head_dim, att.head_dim)


def full_shape(spec: ModelSpec) -> KindShape | None:
    """The full layers' own shape when it differs from the default one (Gemma-4's 512-wide
    global heads, MiMo-V2's 4 KV heads beside 8 in its sliding layers), else None."""
    if spec.attention.kind == "mla":
        return None
    full = kind_shape(spec, FULL)
    return full if full is not None and full != default_shape(spec) else None


def v_differs(spec: ModelSpec) -> bool:
    """Some caching layer stores V at another size than K (MiMo-V2: 192 and 128)."""
    if spec.attention.kind == "mla" or not spec.layer_shapes:
        return False
    return any(s.v_head_dim != s.head_dim for s in spec.layer_shapes if s.caches_kv)


def representative(spec: ModelSpec, full: bool) -> int | None:
    """A layer whose KV per token the named cell holds: a caching full layer, or one of the
    default shape (windowed first)."""
    kinds = (FULL,) if full else ATTENTION_KINDS[::-1]
    for kind in kinds:
        found = caching_layers(spec, kind)
        if found:
            return found[0]
    return None
