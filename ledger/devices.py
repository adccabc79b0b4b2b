"""The device catalog: usable bytes as the driver reports them, beside the vendor's figures."""

import difflib
from dataclasses import dataclass

from .errors import SpecError
from .units import GB, SIZE_HELP, TB, MiB, TiB, parse_size, unit_hint


@dataclass(frozen=True)
class Device:
    """usable_bytes is what CUDA reports (cudaMemGetInfo total = torch total_memory: what vLLM
    multiplies by gpu_memory_utilization), below nvidia-smi's figure and the vendor's decimal
    marketing_bytes. Bandwidth and dense BF16 tensor FLOPS are the vendor's decimal peaks;
    None where no source states them."""

    name: str
    label: str
    marketing_bytes: int
    usable_bytes: int
    bandwidth_bytes_per_s: int | None
    bf16_flops_per_s: int | None
    source: str


def find(name: str) -> Device | None:
    key = name.strip().lower()
    return next((d for d in DEVICES if d.name == key), None)


def _hint(text: str) -> str:
    """A unit hint for a bare unit ('80G' -> 80GiB or 80GB), else the catalog names a mistyped
    one points to ('a100' -> a100-40gb or a100-80gb)."""
    if unit_hint(text):
        return unit_hint(text)
    close = _close_names(text)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _close_names(text: str) -> list[str]:
    """Catalog names containing the text (dashes and spaces aside), else the closest spelt."""
    key = text.strip().lower().replace("-", "").replace(" ", "")
    names = [d.name for d in DEVICES]
    close = [n for n in names if key and key in n.replace("-", "")]
    return close or difflib.get_close_matches(text.strip().lower(), names, n=2)


MAX_DEVICE_BYTES = 64 * TiB  # far above any accelerator: a larger figure is a typo, not a GPU


def resolve_device(text: str, field: str = "device") -> tuple[int, str]:
    """A catalog name ('h100-80gb') or a size ('40GiB', '80GB', bytes) -> (bytes, label)."""
    device = find(str(text))
    if device is not None:
        return device.usable_bytes, f"{device.label} ({device.name})"
    try:
        size = parse_size(text, field)
    except SpecError:
        raise SpecError(field, text, f"expected a catalog name (see `servecap devices`) or "
                        f"{SIZE_HELP}{_hint(str(text))}") from None
    if 0 < size < MiB and str(text).strip().isdigit():  # '--device 40' meant 40 GiB, not bytes
        close = _close_names(str(text))
        also = f" (or the catalog's {close[0]}?)" if len(close) == 1 else ""
        raise SpecError(field, text, f"{int(size):,} bytes is not a device; give a unit: "
                        f"{text}GiB or {text}GB{also}")
    if size > MAX_DEVICE_BYTES:
        raise SpecError(field, text, "at most 64 TiB: one device's memory (a typo in the "
                        "number or unit?)")
    return size, str(text).strip()


DEVICES: tuple[Device, ...] = (
    Device("a100-40gb", "NVIDIA A100-SXM4-40GB", 40 * GB, 42_298_834_944, 1_555 * GB,
           312 * TB, "usable: deviceQuery 40339 MBytes (42298834944 bytes), bottlerocket PR "
           "#3873; 1,555 GB/s and 312 TFLOPS: NVIDIA A100 datasheet (via glennklockwood.com)"),
    Device("a100-80gb", "NVIDIA A100-SXM4-80GB", 80 * GB, 84_987_740_160, 2_039 * GB,
           312 * TB, "usable: deviceQuery 81051 MBytes (84987740160 bytes), driver 12.2 "
           "(85100068864 bytes on 12.5); 2,039 GB/s and 312 TFLOPS: NVIDIA A100 datasheet"),
    Device("h100-80gb", "NVIDIA H100 80GB HBM3", 80 * GB, 85_028_896_768, 3_350 * GB,
           989_400 * GB, "usable: deviceQuery 81090 MBytes (85028896768 bytes), driver 12.8 "
           "(81079-81106 MiB on other drivers; nvidia-smi 81559 MiB); 3.35 TB/s and 989.4 "
           "TFLOPS dense: NVIDIA H100 SXM datasheet (via glennklockwood.com)"),
    Device("h200-141gb", "NVIDIA H200", 141 * GB, 143_156 * MiB, 4_800 * GB, 989_400 * GB,
           "usable: torch total_memory=143156MB (MiB, floored; exact bytes unknown); "
           "nvidia-smi 143771 MiB; 4.8 TB/s, 989 TFLOPS BF16 (open-instruct PR 1441)"),
    Device("l4-24gb", "NVIDIA L4", 24 * GB, 23_612_293_120, 300 * GB, 121 * TB,
           "usable: deviceQuery 22518 MBytes (23612293120 bytes); 300 GB/s; BF16 dense taken "
           "as half of the 242 TFLOPS NVIDIA quotes with sparsity"),
    Device("a10g-24gb", "NVIDIA A10G", 24 * GB, 22_587 * MiB, 600 * GB, None,
           "usable: torch total_memory=22587MB (MiB, floored); 600 GB/s (baseten A10 vs A10G); "
           "BF16 FLOPS: unknown (not published)"),
    Device("l40s-48gb", "NVIDIA L40S", 48 * GB, 47_576_711_168, 864 * GB, 362_050 * GB,
           "usable: deviceQuery 45373 MBytes (47576711168 bytes), driver 12.4; 864 GB/s and "
           "362.05 TFLOPS dense: NVIDIA L40S datasheet table"),
    Device("mi300x-192gb", "AMD Instinct MI300X", 192 * GB, 205_822_885_888, 5_300 * GB,
           1_307_400 * GB, "usable: rocm-smi VRAM Total Memory 205822885888 B (what torch/HIP "
           "reports: unknown); 5.3 TB/s, 1307.4 TFLOPS BF16 dense (MI300X-vs-H200 report)"),
    Device("rtx-4090-24gb", "NVIDIA GeForce RTX 4090", 24 * GB, 25_756_696_576, 1_008 * GB,
           165_200 * GB, "usable: deviceQuery 24564 MBytes (25756696576 bytes), Linux; "
           "1,008 GB/s; 165.2 TFLOPS BF16 with FP32 accumulate"),
)
