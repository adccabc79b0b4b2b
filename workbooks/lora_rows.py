"""The LoRA slots in a workbook (with --enable-lora): vLLM's knobs as Inputs, and the Ledger
line as a formula over them, max_loras x max_lora_rank x the slices' width x b / 8."""

from servecap.ledger.kv import WHOLE
from servecap.ledger.lora import lora_bytes, slot_elements

from . import style
from .source import WorkbookSource

LINE = ("lora_line_bytes", "LoRA adapter slots",
        "=max_loras*max_lora_rank*lora_width_elements*lora_bits_per_element/8"
        "+lora_extra_vocab_bytes",
        "max_loras x max_lora_rank x Σ (A columns + B rows) of every wrapped slice x b / 8: "
        "vLLM's stacked A and B, padded to the rank (+ the extra vocabulary before v0.12)",
        "lora_adapters")


def lora_inputs(src: WorkbookSource) -> list[tuple]:
    """What-if rows (name, value, format, unit, meaning): the slots, their rank and width; none
    without LoRA."""
    lora = src.serve.lora
    if lora is None:
        return []
    width = slot_elements(src.spec, lora, WHOLE) // lora.max_lora_rank
    extra = lora_bytes(src.spec, lora, WHOLE, lora.bits).extra_vocab_bytes
    return [
        ("max_loras", lora.max_loras, style.COUNT, "slots", "vLLM's --max-loras: adapters "
         "in one batch, each a slot on every rank"),
        ("max_lora_rank", lora.max_lora_rank, style.COUNT, "rank", "--max-lora-rank: every "
         "slot's width (the release's ranks only: 1, 8, 16, 32, 64, 128, 256, 320, 512)"),
        ("lora_bits_per_element", lora.bits, style.BITS, "bits", f"the slots' {lora.dtype}"),
        ("lora_width_elements", width, style.ELEMENTS, "elements/rank",
         "Σ over wrapped slices of A columns + B rows (layers x q, k, v, o, gate, up, down; "
         "embed_tokens and lm_head where the family wraps them)"),
        ("lora_extra_vocab_bytes", extra, style.BYTES, "bytes",
         "the extra vocabulary's tensors (vLLM before v0.12 only)"),
    ]


def lora_settings(src: WorkbookSource) -> list[tuple]:
    """The knobs that replay the plan (--from-workbook) without being formula inputs."""
    lora = src.serve.lora
    if lora is None:
        return []
    return [
        ("max_cpu_loras", lora.max_cpu_loras, style.COUNT, "adapters", "--max-cpu-loras: host "
         "copies each rank keeps (host memory, not this device); blank = max_loras"),
        ("lora_target_modules", ",".join(lora.target_modules or ()), None, "text",
         "--lora-target-modules (blank: every module the family supports)"),
        ("fully_sharded_loras", lora.fully_sharded, style.BOOL, "TRUE/FALSE",
         "--fully-sharded-loras"),
        ("lora_dtype", lora.dtype, None, "dtype", "--lora-dtype as planned"),
    ]


def minus_lora(on: bool) -> str:
    """The term a ceiling subtracts for the slots, where the workbook has them."""
    return "-lora_line_bytes" if on else ""
