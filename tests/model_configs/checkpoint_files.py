"""Checkpoint files as a quantizer writes them, for the tests: safetensors files with real dtype
names (F8_E4M3, U8, I32, ...), shapes and offsets and zero-filled (sparse) data, so a header
holds exactly what the format stores; tensor layouts follow the formats' own writers."""

import json
import struct
from pathlib import Path

WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1, "U8": 1,
         "I8": 1, "I16": 2, "I32": 4, "I64": 8}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """The file, and the bytes of tensor data it holds (what an index's total_size sums)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = WIDTH[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset,
                                                                                offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        handle.truncate(8 + len(raw) + offset)
    return offset


def nvfp4(name: str, rows: int, cols: int, w4a4: bool = True) -> dict:
    """modelopt NVFP4 (vLLM's KNvfp4Static/KNvfp4Dynamic create_weights @v0.32.0)."""
    out = {f"{name}.weight": ("U8", (rows, cols // 2)),
           f"{name}.weight_scale": ("F8_E4M3", (rows, cols // 16)),
           f"{name}.weight_scale_2": ("F32", ())}
    if w4a4:
        out[f"{name}.input_scale"] = ("F32", ())
    return out


def fp8_tensor(name: str, rows: int, cols: int) -> dict:
    """modelopt FP8: e4m3 weight, fp32 weight scale and static input scale."""
    return {f"{name}.weight": ("F8_E4M3", (rows, cols)), f"{name}.weight_scale": ("F32", ()),
            f"{name}.input_scale": ("F32", ())}


def dense(name: str, rows: int, cols: int, dtype: str = "BF16") -> dict:
    return {f"{name}.weight": (dtype, (rows, cols) if rows > 1 else (cols,))}


def llama_tensors(cfg: dict, linear) -> dict:
    """A Llama checkpoint's tensors; `linear(name, rows, cols)` stores each projection."""
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = h // heads
    out = dense("model.embed_tokens", v, h) | dense("model.norm", 1, h)
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        for leaf, rows, cols in (("self_attn.q_proj", heads * d, h),
                                 ("self_attn.k_proj", kv * d, h),
                                 ("self_attn.v_proj", kv * d, h),
                                 ("self_attn.o_proj", h, heads * d),
                                 ("mlp.gate_proj", inter, h), ("mlp.up_proj", inter, h),
                                 ("mlp.down_proj", h, inter)):
            out |= linear(p + leaf, rows, cols)
        out |= dense(p + "input_layernorm", 1, h) | dense(p + "post_attention_layernorm", 1, h)
    return out | linear("lm_head", v, h)


def ct_w4a16(name: str, rows: int, cols: int, group: int = 128) -> dict:
    """compressed-tensors pack-quantized int4 (symmetric): int32-packed values, a bf16 scale
    per group and the int64 (2,) weight_shape."""
    return {f"{name}.weight_packed": ("I32", (rows, cols // 8)),
            f"{name}.weight_scale": ("BF16", (rows, cols // group)),
            f"{name}.weight_shape": ("I64", (2,))}


def ct_nvfp4(name: str, rows: int, cols: int) -> dict:
    """compressed-tensors nvfp4-pack-quantized (W4A4)."""
    return {f"{name}.weight_packed": ("U8", (rows, cols // 2)),
            f"{name}.weight_scale": ("F8_E4M3", (rows, cols // 16)),
            f"{name}.weight_global_scale": ("F32", (1,)),
            f"{name}.input_global_scale": ("F32", (1,))}


def ct_w8a8_int8(name: str, rows: int, cols: int) -> dict:
    """compressed-tensors int-quantized W8A8 (dynamic tokens): int8 values, a bf16 scale
    per output channel."""
    return {f"{name}.weight": ("I8", (rows, cols)),
            f"{name}.weight_scale": ("BF16", (rows, 1))}


def ct_sparse24_fp8(name: str, rows: int, cols: int) -> dict:
    """sparse-24-bitmask over fp8 per-channel: half the values, a packed 1-bit mask, the
    shape, and the quantization's fp32 scale per output row."""
    return {f"{name}.compressed": ("F8_E4M3", (rows, cols // 2)),
            f"{name}.bitmask": ("U8", (rows, cols // 8)), f"{name}.shape": ("I64", (2,)),
            f"{name}.weight_scale": ("F32", (rows, 1))}


def gptq(name: str, rows: int, cols: int, bits: int = 4, group: int = 128) -> dict:
    """GPTQ (auto_gptq packing, auto-round's default): qweight (cols*bits/32, rows) int32,
    qzeros (cols/group, rows*bits/32) int32, scales (cols/group, rows) fp16, g_idx (cols)."""
    return {f"{name}.qweight": ("I32", (cols * bits // 32, rows)),
            f"{name}.qzeros": ("I32", (cols // group, rows * bits // 32)),
            f"{name}.scales": ("F16", (cols // group, rows)),
            f"{name}.g_idx": ("I32", (cols,))}


def bnb_nf4(name: str, rows: int, cols: int) -> dict:
    """bitsandbytes 4-bit with double quantization, as transformers saves it: packed values,
    a uint8 absmax per 64, its fp32 absmax per 256 blocks, the two fp32 code maps and the
    quant_state blob."""
    numel = rows * cols
    return {f"{name}.weight": ("U8", (numel // 2, 1)),
            f"{name}.weight.absmax": ("U8", (numel // 64,)),
            f"{name}.weight.nested_absmax": ("F32", (-(-numel // 64 // 256),)),
            f"{name}.weight.nested_quant_map": ("F32", (256,)),
            f"{name}.weight.quant_map": ("F32", (16,)),
            f"{name}.weight.quant_state.bitsandbytes__nf4": ("U8", (120,))}


# GGUF (ggml docs/gguf.md): value types and ggml block sizes as llama.cpp's gguf-py writes them
GGUF_SIZES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _gguf_value(value) -> bytes:
    if isinstance(value, str):
        return struct.pack("<I", 8) + _gguf_string(value)
    if isinstance(value, list):  # arrays of strings (a tokenizer's tokens)
        return struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_gguf_string(v) for v in value)
    return struct.pack("<II", 4, value)  # uint32


def write_gguf(path: Path, meta: dict, tensors: list[tuple[str, tuple[int, ...], int]]) -> int:
    """A GGUF v3 file with zero-filled tensor data; returns the bytes of tensor data."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    head += b"".join(_gguf_string(k) + _gguf_value(v) for k, v in meta.items())
    offset, infos = 0, b""
    for name, shape, kind in tensors:
        block, size = GGUF_SIZES[kind]
        numel = 1
        for dim in shape:
            numel *= dim
        infos += _gguf_string(name) + struct.pack("<I", len(shape))
        infos += b"".join(struct.pack("<Q", d) for d in shape) + struct.pack("<IQ", kind, offset)
        offset += -(-(numel // block * size) // 32) * 32  # tensors aligned to 32 bytes
    raw = head + infos
    raw += b"\0" * (-len(raw) % 32)
    with path.open("wb") as handle:
        handle.write(raw)
        handle.truncate(len(raw) + offset)
    return sum(1 for _ in tensors)
