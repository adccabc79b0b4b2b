"""A quantized checkpoint's resident bytes in vLLM on each GPU generation: the kernel each of
its formats runs with there (ledger/quant_kernels.py), or the one line saying why that
release refuses it. Resident = the checkpoint's weights and scales as held: the same bytes,
except GPTQ's g_idx, which Marlin drops without act-order and keeps with a sort index beside
it with act-order (gptq_marlin.py process_weights_after_loading @v0.32.0)."""

from dataclasses import dataclass, replace

from .model import ModelSpec, Quant
from .quant_kernels import GENERATIONS, checkpoint_refusal, gguf_kernel, kernel, path_on
from .weights import weight_bytes


@dataclass(frozen=True)
class Residency:
    """One GPU generation: whether the release runs every format, how, and the bytes held."""

    generation: str
    sm: int
    runs: bool
    how: str
    resident_bytes: int


def formats(quant: Quant) -> tuple[Quant, ...]:
    """Every storage format of a checkpoint (its own, unless only listed modules take one)."""
    found = [] if quant.unlisted_dense else [quant]
    for _, fmt in quant.module_formats:
        if all(fmt.name != f.name for f in found):
            found.append(fmt)
    return tuple(found)


def by_generation(spec: ModelSpec, dense_bits: int, version: tuple[int, ...],
                  checkpoint_bytes: int) -> tuple[Residency, ...]:
    """Each generation, newest first, for the checkpoint's own quantization (spec.quant)."""
    quant = spec.quant
    rows = []
    for name, sm in GENERATIONS:
        paths = [(fmt, path_on(kernel(fmt.method, version, fmt.sparse_24, quant.producer), sm))
                 for fmt in formats(quant)]
        whole = checkpoint_refusal(quant.producer, quant.unlisted_dense, any(
            f.method == "nvfp4" and not f.input_scale for f in formats(quant)), version, sm)
        refused = ([whole] if whole else []) + [how for _, (runs, how) in paths if not runs]
        if refused:
            rows.append(Residency(name, sm, False, refused[0], 0))
            continue
        how = "; ".join(f"{fmt.name}: {how}" for fmt, (_, how) in paths)
        marlin = any(_marlin_on(fmt, version, sm) for fmt in formats(quant))
        delta = _repack_delta(spec, dense_bits, quant) if marlin else 0
        rows.append(Residency(name, sm, True, how, checkpoint_bytes + delta))
    return tuple(rows)


def _marlin_on(fmt: Quant, version: tuple[int, ...], sm: int) -> bool:
    """GPTQ weights that Marlin repacks on this generation."""
    if fmt.method != "gptq":
        return False
    k = kernel(fmt.method, version)
    return not isinstance(k, str) and sm >= k.native_sm


def _repack_delta(spec: ModelSpec, dense_bits: int, quant: Quant) -> int:
    """Marlin on GPTQ: without act-order the g_idx (one int32 per input column) is dropped;
    with it, a sort index as large joins it."""
    if not _has_gptq(quant):
        return 0
    with_idx = weight_bytes(spec, dense_bits, quant)
    without = weight_bytes(spec, dense_bits, _no_g_idx(quant))
    g_idx = with_idx.metadata_bytes - without.metadata_bytes
    return g_idx if quant.act_order else -g_idx


def _has_gptq(quant: Quant) -> bool:
    return quant.method == "gptq" or any(f.method == "gptq" for _, f in quant.module_formats)


def _no_g_idx(quant: Quant) -> Quant:
    def strip(fmt: Quant) -> Quant:
        return replace(fmt, method="gptq-marlin") if fmt.method == "gptq" else fmt
    return replace(strip(quant), module_formats=tuple((p, strip(f))
                                                      for p, f in quant.module_formats))


def gguf_by_generation(version: tuple[int, ...], file_bytes: int) -> tuple[Residency, ...]:
    """A GGUF file's tensors in vLLM: held as stored, where the release still reads GGUF."""
    k = gguf_kernel(version)
    rows = []
    for name, sm in GENERATIONS:
        runs, how = path_on(k, sm)
        rows.append(Residency(name, sm, runs, how, file_bytes if runs else 0))
    return tuple(rows)
