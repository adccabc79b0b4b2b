"""A multimodal model's encoder cache and encoder peak in a workbook (with vLLM's multimodal
flags): the profiled items as vLLM counts them, and both Ledger lines, as formulas over the
scheduler's Inputs (max_num_batched_tokens, max_num_seqs, context_tokens) and the item's
tokens (ledger/encoder.py, cell for cell)."""

import json
from dataclasses import replace

from servecap.ledger import dtypes
from servecap.ledger.encoder import encoder_budget, scheduled
from servecap.ledger.engines import VLLM

from . import style
from .source import WorkbookSource

# vLLM's MultiModalBudget._get_max_items for the modality profiled (one device: tp 1)
ITEMS = ("MAX(1,MIN(INT(MAX(max_num_batched_tokens,encoder_tokens_per_item)"
         "/encoder_tokens_per_item),max_num_seqs*MAX(1,MIN(encoder_limit_per_prompt,"
         "INT(context_tokens/encoder_tokens_per_item)))))")
CACHE_LINE = ("encoder_cache_line_bytes", "multimodal encoder cache (profiled)",
              f"={ITEMS}*encoder_tokens_per_item*encoder_embed_width*encoder_dtype_bytes",
              "items x tokens an item x embedding width x dtype bytes: the encoder outputs "
              "vLLM holds while it profiles the decoder (items = max(1, min(budget // tokens, "
              "max_num_seqs x max(1, min(limit, context // tokens)))))", "encoder_cache")
PROFILE_LINE = ("encoder_profile_line_bytes", "vision encoder peak beyond runtime peak",
                f"={ITEMS}*encoder_held_bytes_per_item+MAX(0,{ITEMS}"
                "*encoder_activation_bytes_per_item-runtime_peak_bytes)",
                "what vLLM's profile keeps beside the cache (the dummy pixel values) and the "
                "encoder forward's working set over the profiled items, beyond the decoder's "
                "runtime peak (an estimate: pixels and one layer's tensors)",
                "encoder_profile")
NAMES = (CACHE_LINE[0], PROFILE_LINE[0])


def _budget(src: WorkbookSource):
    serve = src.serve
    enc = scheduled(serve.encoder, serve.max_num_batched_tokens, serve.context_tokens,
                    serve.max_num_seqs, 1, _dtype_bytes(src))
    # vLLM's profile keeps its dummy inputs beside the cache (ledger/encoder.py held_bytes)
    enc = replace(enc, holds_inputs=src.engine.name == VLLM)
    return enc, encoder_budget(src.spec.vision, enc)


def has_lines(src: WorkbookSource) -> bool:
    """The workbook has the encoder lines where the plan has them."""
    return src.plan().line("encoder_cache") > 0


def encoder_inputs(src: WorkbookSource) -> list[tuple]:
    """What-if rows: the profiled modality's tokens an item and its limit, the width and dtype
    of one embedding, and the encoder's working set per item."""
    if not has_lines(src):
        return []
    enc, found = _budget(src)
    per_item = found.activation_bytes // found.items
    return [
        ("encoder_tokens_per_item", found.max_tokens_per_item, style.TOKENS, "tokens",
         f"the largest {found.modality} item's embedding tokens (the model's processor, "
         "--mm-processor-kwargs)"),
        ("encoder_limit_per_prompt", enc.limit(found.modality), style.COUNT, "items",
         f"--limit-mm-per-prompt {found.modality} (999 when not named)"),
        ("encoder_embed_width", src.spec.vision.out_width, style.ELEMENTS, "elements",
         "one embedding's width as the language model receives it"),
        ("encoder_dtype_bytes", enc.dtype_bytes, style.COUNT, "bytes", "the model dtype"),
        ("encoder_activation_bytes_per_item", per_item, style.BYTES, "bytes",
         "the vision encoder's working set for one item (estimate)"),
        ("encoder_held_bytes_per_item", found.held_bytes // found.items, style.BYTES, "bytes",
         "what vLLM's profile holds beside the cache for one item: its dummy pixel values "
         "(0 for other engines)"),
    ]


def encoder_settings(src: WorkbookSource) -> list[tuple]:
    """The flags that replay the plan (--from-workbook)."""
    enc = src.serve.encoder
    if enc is None or not has_lines(src):
        return []
    return [
        ("limit_mm_per_prompt", json.dumps(dict(enc.limits)) if enc.limits else "", None,
         "text", "--limit-mm-per-prompt as planned (the profiled modality's count: "
         "encoder_limit_per_prompt)"),
        ("mm_processor_kwargs", json.dumps(dict(enc.processor_kwargs))
         if enc.processor_kwargs else "", None, "text", "--mm-processor-kwargs"),
        ("mm_encoder_tp_mode", enc.tp_mode, None, "text", "--mm-encoder-tp-mode"),
        ("encoder_modality", _budget(src)[1].modality, None, "text",
         "the modality vLLM profiles (most tokens an item)"),
    ]


def replayed(limits_text: str, modality: str, modality_limit: int) -> str | None:
    """--limit-mm-per-prompt again, with the (perhaps edited) count of the profiled modality;
    999 is vLLM's own default, left unnamed."""
    limits = json.loads(limits_text) if limits_text else {}
    if modality_limit != 999 or modality in limits:
        limits[modality] = modality_limit
    return json.dumps(limits) if limits else None


def _dtype_bytes(src: WorkbookSource) -> int:
    return dtypes.lookup(src.serve.activation_dtype, "activation_dtype",
                         dtypes.ACTIVATION_DTYPES).bits // 8
