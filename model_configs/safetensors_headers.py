"""Exact weight bytes from safetensors headers (no tensor is loaded), split into values and
quantization metadata by tensor name."""

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from servecap.ledger.errors import SpecError

from .reading import parse_json, read_text

# scales, zero points, group indices; compressed-tensors' weight_shape and 2:4 bitmask;
# bitsandbytes' absmax, quant_map, quant_state and SCB
METADATA_SUFFIXES = ("scales", "scale", "scale_inv", "scale_2", "qzeros", "zeros", "g_idx",
                     "zero_point", "shape", "bitmask", "absmax", "quant_map", "SCB",
                     "bitsandbytes__nf4", "bitsandbytes__fp4", "weight_format")
MAX_HEADER_BYTES = 100 * 2**20


@dataclass(frozen=True)
class HeaderBytes:
    """Bytes of values and of metadata; by_dtype: (dtype, value bytes, metadata bytes, value
    elements) for each dtype the headers name (empty when only an index's total is known)."""

    param_bytes: int
    metadata_bytes: int
    num_tensors: int
    num_files: int
    by_dtype: tuple[tuple[str, int, int, int], ...] = ()
    gguf: bool = False  # a GGUF tensor table: ggml block types, elements counted as they are

    def parameters(self, packed_bits: int = 4) -> int:
        """Parameters the value tensors hold: elements, with uint8 (two 4-bit values a byte:
        NVFP4, MXFP4, bitsandbytes 4-bit) and int32 (32 / packed_bits a word: GPTQ, AWQ,
        compressed-tensors pack-quantized) unpacked."""
        unpack = {} if self.gguf else {"U8": 2, "I32": 32 // packed_bits}
        return sum(numel * unpack.get(dtype, 1) for dtype, _, _, numel in self.by_dtype)


def is_metadata(tensor_name: str) -> bool:
    """Scales, zero points and group indices are metadata; everything else is a weight value."""
    leaf = tensor_name.rsplit(".", 1)[-1]
    return leaf.endswith(METADATA_SUFFIXES) and leaf not in ("weight", "bias")


def read_header(path: Path) -> dict:
    """The JSON header of one safetensors file: 8-byte little-endian length, then JSON."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open
            raise ValueError("not a regular file")
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > MAX_HEADER_BYTES:
                raise ValueError(f"header length {length} is implausible")
            header = parse_json(handle.read(length).decode("utf-8"))
            if not isinstance(header, dict):
                raise ValueError("the header is not a JSON object")
            return header
    except SpecError as exc:
        raise SpecError("safetensors header", str(path), f"not a readable safetensors file "
                        f"({exc.line()})") from None
    except (OSError, ValueError, struct.error) as exc:
        raise SpecError("safetensors header", str(path), f"not a readable safetensors file "
                        f"({exc})") from None


def header_bytes(files: list[Path]) -> HeaderBytes:
    """Σ (end - begin) over every tensor's data_offsets, by category and dtype."""
    tensors, dtypes = 0, {}
    for path in files:
        for name, info in read_header(path).items():
            if name == "__metadata__":
                continue
            begin, end = _offsets(path, name, info)
            tensors += 1
            row = dtypes.setdefault(str(info.get("dtype", "?")), [0, 0, 0])
            if is_metadata(name):
                row[1] += end - begin
            else:
                row[0] += end - begin
                row[2] += _numel(info.get("shape"))
    by_dtype = tuple((d, v, m, n) for d, (v, m, n) in sorted(dtypes.items(),
                                                               key=lambda kv: -sum(kv[1][:2])))
    return HeaderBytes(sum(r[1] for r in by_dtype), sum(r[2] for r in by_dtype), tensors,
                       len(files), by_dtype)


def _numel(shape: object) -> int:
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return 0
    numel = 1
    for dim in shape:
        numel *= dim
    return numel


def _offsets(path: Path, name: str, info: object) -> tuple[int, int]:
    """[begin, end) of one tensor's bytes; anything else is a corrupt header, not a zero."""
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise SpecError(f"safetensors header {name}.data_offsets", offsets,
                        f"[begin, end] with 0 <= begin <= end (in {path})")
    return offsets[0], offsets[1]


def directory_weights(directory: Path) -> HeaderBytes | None:
    """From the shards' headers when present; else the index's metadata.total_size (which
    cannot tell metadata apart: reported as all values); None when neither exists."""
    files = sorted(directory.glob("*.safetensors"))
    if files:
        return header_bytes(files)
    index = directory / "model.safetensors.index.json"
    if not index.exists():
        return None
    try:
        total = parse_json(read_text(index))["metadata"]["total_size"]
    except SpecError as exc:
        raise exc.at(str(index)) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecError("metadata.total_size", str(index), f"unreadable index ({exc})") from None
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise SpecError("metadata.total_size", total, f"a byte count >= 1 (in {index})")
    return HeaderBytes(total, 0, 0, 0)
