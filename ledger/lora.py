"""LoRA adapter slots: what vLLM allocates on each rank for --enable-lora, and the host copies
its CPU cache holds.

vLLM wraps every target module once at start-up and gives it max_loras slots of LoRA A and B
at max_lora_rank, zeros until an adapter is loaded (vllm/lora/layers/base_linear.py,
column_parallel_linear.py, row_parallel_linear.py, vocal_parallel_embedding.py,
logits_processor.py: create_lora_weights, read at v0.10.2, v0.12.0 and v0.33.0). An adapter of
a smaller rank is zero-padded into its slot, so the slots are sized by max_lora_rank, never by
the adapters. They are allocated inside the weights' measurement ('Model loading took'), so
vLLM's KV pool is what is left after them."""

from dataclasses import dataclass, replace

from . import dtypes
from .errors import SpecError
from .kv import Shard
from .lines import Line
from .lora_rules import (
    Family,
    check_edge_targets,
    check_rank,
    check_targets,
    check_vocab,
    extra_vocab,
    family,
)
from .model import ModelSpec
from .sharding import VOCAB_PADDING

NEWEST_RULES = (0, 33, 0)  # the release whose source the rules were last read at


@dataclass(frozen=True)
class LoraSpec:
    """vLLM's LoRA knobs. max_cpu_loras None: max_loras (LoRAConfig's default); target_modules
    None: every module the family supports; dtype: the slots' (--lora-dtype auto: the model
    dtype); release: the vLLM release whose rules apply."""

    max_loras: int = 1
    max_lora_rank: int = 16
    max_cpu_loras: int | None = None
    target_modules: tuple[str, ...] | None = None
    fully_sharded: bool = False
    dtype: str = "bf16"
    release: tuple[int, ...] = NEWEST_RULES

    def __post_init__(self) -> None:
        for name in ("max_loras", "max_lora_rank"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SpecError("--" + name.replace("_", "-"), value, "a whole number >= 1")
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise SpecError("--max-cpu-loras", self.max_cpu_loras, f"at least --max-loras "
                            f"({self.max_loras}): the CPU cache holds every adapter in a slot")
        dtypes.lookup(self.dtype, "--lora-dtype", dtypes.ACTIVATION_DTYPES)
        check_rank(self.max_lora_rank, self.release)
        check_targets(self.target_modules, self.release)

    @property
    def bits(self) -> int:
        return dtypes.lookup(self.dtype, "--lora-dtype", dtypes.ACTIVATION_DTYPES).bits

    @property
    def cpu_loras(self) -> int:
        return self.max_cpu_loras if self.max_cpu_loras is not None else self.max_loras


@dataclass(frozen=True)
class Slice:
    """One slice of a wrapped module on one rank, per slot: LoRA A (a_rows x a_cols) and LoRA B
    (b_rows x b_cols). module: the checkpoint's name (q_proj ... embed_tokens, lm_head)."""

    module: str
    a_rows: int
    a_cols: int
    b_rows: int
    b_cols: int

    @property
    def elements(self) -> int:
        return self.a_rows * self.a_cols + self.b_rows * self.b_cols


def layer_slices(spec: ModelSpec, lora: LoraSpec, tp: int) -> tuple[Slice, ...]:
    """One decoder layer's slices on a rank. Column-parallel (q/k/v, gate/up): A is rank x
    hidden (rank / tp when fully sharded), B this rank's output rows x rank. Row-parallel
    (o_proj, down_proj): A is rank x this rank's input columns, B hidden x rank (hidden / tp
    when fully sharded). Packed projections keep one A and B per slice."""
    fam = _family(spec, lora)
    r, h, att = lora.max_lora_rank, spec.hidden_size, spec.attention
    col = _divide(r, tp, "--max-lora-rank") if lora.fully_sharded else r
    out_h = _divide(h, tp, "hidden_size") if lora.fully_sharded else h
    q = att.num_heads // tp * att.head_dim
    kv = -(-att.num_kv_heads // tp) * att.head_dim
    inter = spec.intermediate_size // tp
    if fam.qkv_slices == 3:
        qkv = [Slice("q_proj", col, h, q, r), Slice("k_proj", col, h, kv, r),
               Slice("v_proj", col, h, kv, r)]
    else:
        qkv = [Slice("qkv_proj", col, h, q + 2 * kv, r)]
    if fam.gate_up_slices == 2:
        mlp = [Slice("gate_proj", col, h, inter, r), Slice("up_proj", col, h, inter, r)]
    else:
        mlp = [Slice("gate_up_proj", col, h, 2 * inter, r)]
    rows = qkv + [Slice("o_proj", r, q, out_h, r)] + mlp + [Slice("down_proj", r, inter,
                                                                   out_h, r)]
    return tuple(s for s in rows if _targeted(s.module, lora.target_modules))


def edge_slices(spec: ModelSpec, lora: LoraSpec, first: bool, last: bool) -> tuple[Slice, ...]:
    """The embedding's and lm_head's slices where the family wraps them, whole on every rank:
    embedding A is (vocab + extra) x rank, B hidden x rank; lm_head A rank x hidden, B the
    vocabulary (padded to 256 with the extra rows before v0.12) x rank."""
    fam = _family(spec, lora)
    check_edge_targets(lora.target_modules, fam)
    if not fam.embeddings:
        return ()
    check_vocab(spec.vocab_size, lora.release, fam)
    r, h, extra = lora.max_lora_rank, spec.hidden_size, extra_vocab(lora.release, fam)
    out = []
    if first and _targeted("embed_tokens", lora.target_modules):
        out.append(Slice("embed_tokens", spec.vocab_size + extra, r, h, r))
    if last and _targeted("lm_head", lora.target_modules):
        vocab = spec.vocab_size if not extra else _pad(spec.vocab_size + extra, 256)
        out.append(Slice("lm_head", r, h, vocab, r))
    return tuple(out)


@dataclass(frozen=True)
class LoraBytes:
    """One rank's LoRA memory: slots (max_loras x Σ slice elements x bits / 8), the extra
    vocabulary's tensors before v0.12 (slot embeddings, and the rows it adds to the base
    embedding and lm_head), and the adapters the CPU cache holds (host, not device)."""

    slot_bytes: int
    extra_vocab_bytes: int
    host_bytes: int
    num_modules: int
    how: str

    @property
    def device_bytes(self) -> int:
        return self.slot_bytes + self.extra_vocab_bytes


def lora_bytes(spec: ModelSpec, lora: LoraSpec, shard: Shard, model_bits: int) -> LoraBytes:
    """Device and host bytes of one rank (model_bits: the model dtype's width, which the extra
    vocabulary's rows take)."""
    layers = len(shard.layer_ids(spec))
    per_layer = layer_slices(spec, lora, shard.tensor_parallel_size)
    edges = edge_slices(spec, lora, shard.first_stage, shard.last_stage)
    elements = slot_elements(spec, lora, shard)
    slots = lora.max_loras * elements * lora.bits // 8
    extra = _extra_vocab_bytes(spec, lora, shard, model_bits)
    host = lora.cpu_loras * host_elements(spec, lora, shard) * lora.bits // 8
    how = (f"vLLM {_tag(lora.release)}: {lora.max_loras} slots x {elements:,} elements at rank "
           f"{lora.max_lora_rank} x {lora.bits // 8} B ({len(per_layer)} slices x {layers} layers"
           + (f" + {', '.join(s.module for s in edges)}" if edges else "") + ")"
           + (f" + extra vocabulary {extra:,} B" if extra else ""))
    return LoraBytes(slots, extra, host, len(per_layer) * layers + len(edges), how)


def slot_elements(spec: ModelSpec, lora: LoraSpec, shard: Shard) -> int:
    """One slot's elements on a rank: layers x Σ per-layer slices + the embedding's and
    lm_head's; each slice's A and B are max_lora_rank wide, so this is rank x a width."""
    layers = len(shard.layer_ids(spec))
    per_layer = layer_slices(spec, lora, shard.tensor_parallel_size)
    edges = edge_slices(spec, lora, shard.first_stage, shard.last_stage)
    return layers * sum(s.elements for s in per_layer) + sum(s.elements for s in edges)


def host_elements(spec: ModelSpec, lora: LoraSpec, shard: Shard) -> int:
    """One adapter at max_lora_rank as the CPU cache holds it: every slice unsharded (each
    worker loads the whole adapter and cuts its share when it fills a slot)."""
    whole = Shard(1, shard.layers, shard.first_stage, shard.last_stage)
    return slot_elements(spec, replace(lora, fully_sharded=False), whole)


def _extra_vocab_bytes(spec: ModelSpec, lora: LoraSpec, shard: Shard, model_bits: int) -> int:
    """Before v0.12 (families with embedding slots): each slot's extra-vocabulary embeddings in
    the embedding and in lm_head (max_loras x 256 x hidden each, model dtype), the base
    embedding's 256 x max_loras extra rows and lm_head's 256 extra rows (padded to 256), both
    split by the vocabulary as the base rows are."""
    fam = _family(spec, lora)
    extra = extra_vocab(lora.release, fam)
    if not extra:
        return 0
    tp, h, v = shard.tensor_parallel_size, spec.hidden_size, spec.vocab_size
    elements = 0
    if shard.first_stage and _targeted("embed_tokens", lora.target_modules):
        added = _pad(v, VOCAB_PADDING) + _pad(extra * lora.max_loras, VOCAB_PADDING)
        elements += lora.max_loras * extra * h + (added // tp - _pad(v, VOCAB_PADDING) // tp) * h
    if shard.last_stage and _targeted("lm_head", lora.target_modules):
        head = _pad(v, 256) + _pad(extra, 256)
        tied = spec.tie_word_embeddings
        elements += lora.max_loras * extra * h + (0 if tied else (
            head // tp - _pad(v, VOCAB_PADDING) // tp) * h)
    return elements * model_bits // 8


def _family(spec: ModelSpec, lora: LoraSpec) -> Family:
    if not spec.has_architecture or spec.moe is not None or spec.attention.kind == "mla" \
            or spec.is_hybrid:
        return family("", lora.release, spec.name)
    return family(spec.model_type, lora.release, spec.name)


def _targeted(module: str, targets: tuple[str, ...] | None) -> bool:
    """--lora-target-modules keeps a module when its name, or its packed parent's, is listed
    (vllm/lora/utils.py is_in_target_modules)."""
    if targets is None:
        return True
    parents = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
               "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}
    siblings = {p: [c for c, q in parents.items() if q == p] for p in set(parents.values())}
    group = parents.get(module, module)
    return module in targets or group in targets or any(c in targets
                                                        for c in siblings.get(group, ()))


def _divide(value: int, tp: int, field: str) -> int:
    if value % tp:
        raise SpecError("--fully-sharded-loras", f"{field} {value}", f"needs {field} divisible "
                        f"by the tensor-parallel size {tp} (vLLM's divide)")
    return value // tp


def _tag(release: tuple[int, ...]) -> str:
    return "v" + ".".join(map(str, release))


def lora_lines(spec: ModelSpec, lora: LoraSpec | None, shard: Shard, model_bits: int):
    """(the device line, the host line) of one rank; () each without LoRA."""
    if lora is None:
        return (), ()
    found = lora_bytes(spec, lora, shard, model_bits)
    device = Line("lora_adapters", "LoRA adapter slots", found.device_bytes, found.how)
    host = Line("lora_host", "LoRA adapters in the CPU cache", found.host_bytes,
                f"{lora.cpu_loras} adapters (--max-cpu-loras) at rank {lora.max_lora_rank}, "
                "unsharded: each rank's worker keeps its own copies")
    return (device,), (host,)


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
