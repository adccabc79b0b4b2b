"""A GGUF file (llama.cpp's format) read from its header alone: the metadata keys that give the
architecture and the tensor table (name, shape, ggml type), never a tensor. Each tensor's bytes
are its elements / block size x type size (ggml-org/llama.cpp gguf-py/gguf/constants.py
GGML_QUANT_SIZES @0024aa7417efd50a7c2a79e049dfbbbceb0beaaf; the layout: ggml docs/gguf.md)."""

import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO

from servecap.ledger.errors import SpecError

from .safetensors_headers import HeaderBytes

MAGIC = b"GGUF"
# ggml_type id -> (name, elements per block, bytes per block)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}
# GGUF value types: struct format (scalars), 8 string, 9 array
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
LIMITS = {"tensors": 1_000_000, "keys": 100_000, "string": 16 * 2**20, "array": 16_000_000}


class _Reader:
    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self.handle, self.path = handle, path

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        raw = self.handle.read(size)
        if len(raw) != size:
            raise ValueError("the header ends early")
        return struct.unpack(fmt, raw)[0]

    def string(self) -> str:
        length = self.take("<Q")
        if length > LIMITS["string"]:
            raise ValueError(f"a {length}-byte string is implausible")
        return self.handle.read(length).decode("utf-8", errors="replace")

    def value(self, kind: int):
        if kind in SCALARS:
            return self.take(SCALARS[kind])
        if kind == 8:
            return self.string()
        if kind == 9:
            inner, count = self.take("<I"), self.take("<Q")
            if count > LIMITS["array"]:
                raise ValueError(f"a {count}-item array is implausible")
            return [self.value(inner) for _ in range(count)]
        raise ValueError(f"unknown value type {kind}")


def read_gguf(path: Path) -> tuple[dict, list[tuple[str, tuple[int, ...], int]]]:
    """(metadata, [(tensor name, shape, ggml type id)]); a file that is not GGUF v2/v3 is a
    one-line error naming it."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError("not a regular file")
        with path.open("rb") as handle:
            return _read(_Reader(handle, path))
    except (OSError, ValueError, struct.error) as exc:
        raise SpecError("GGUF header", str(path), f"not a readable GGUF file ({exc})") from None


def _read(r: _Reader) -> tuple[dict, list]:
    if r.handle.read(4) != MAGIC:
        raise ValueError("no GGUF magic")
    version = r.take("<I")
    if version not in (2, 3):
        raise ValueError(f"version {version} (GGUF 2 and 3 are read)")
    tensors, keys = r.take("<Q"), r.take("<Q")
    if tensors > LIMITS["tensors"] or keys > LIMITS["keys"]:
        raise ValueError(f"{tensors} tensors and {keys} keys are implausible")
    meta = {}
    for _ in range(keys):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    table = []
    for _ in range(tensors):
        name, dims = r.string(), r.take("<I")
        shape = tuple(r.take("<Q") for _ in range(dims))
        kind = r.take("<I")
        r.take("<Q")  # offset into the data section
        table.append((name, shape, kind))
    return meta, table


def tensor_bytes(name: str, shape: tuple[int, ...], kind: int) -> int:
    """Elements / block x block bytes; a row not a whole number of blocks is refused."""
    if kind not in GGML_TYPES:
        raise SpecError(f"GGUF tensor {name}.type", kind, "a ggml type: " + ", ".join(
            t[0] for t in GGML_TYPES.values()))
    _, block, size = GGML_TYPES[kind]
    numel = 1
    for dim in shape:
        numel *= dim
    if numel % block:
        raise SpecError(f"GGUF tensor {name}.shape", list(shape),
                        f"a multiple of {GGML_TYPES[kind][0]}'s {block}-element blocks")
    return numel // block * size


def gguf_weights(table: list) -> HeaderBytes:
    """The tensors' bytes by ggml type (scales live inside the blocks: no metadata apart)."""
    rows: dict[str, list[int]] = {}
    for name, shape, kind in table:
        row = rows.setdefault(GGML_TYPES.get(kind, ("?",))[0], [0, 0])
        row[0] += tensor_bytes(name, shape, kind)
        numel = 1
        for dim in shape:
            numel *= dim
        row[1] += numel
    by_type = tuple((t, b, 0, n) for t, (b, n) in sorted(rows.items(), key=lambda kv: -kv[1][0]))
    return HeaderBytes(sum(r[1] for r in by_type), 0, len(table), 1, by_type, gguf=True)
