"""The device catalog: usable bytes as the driver reports them, beside the vendor's figures."""

from dataclasses import dataclass

from .errors import SpecError
from .units import GB, SIZE_HELP, TB, parse_size


@dataclass(frozen=True)
class Device:
    """usable_bytes is what the driver reports (torch total_memory); marketing_bytes is the
    vendor's decimal figure. Bandwidth and FLOPS are the vendor's decimal numbers (dense BF16)."""

    name: str
    label: str
    marketing_bytes: int
    usable_bytes: int
    bandwidth_bytes_per_s: int
    bf16_flops_per_s: int
    source: str


def find(name: str) -> Device | None:
    key = name.strip().lower()
    return next((d for d in DEVICES if d.name == key), None)


def resolve_device(text: str, field: str = "device") -> tuple[int, str]:
    """A catalog name ('h100-80gb') or a size ('40GiB', '80GB', bytes) -> (bytes, label)."""
    device = find(str(text))
    if device is not None:
        return device.usable_bytes, f"{device.label} ({device.name})"
    try:
        return parse_size(text, field), str(text).strip()
    except SpecError:
        raise SpecError(field, text, f"expected a catalog name (see `servecap devices`) or "
                        f"{SIZE_HELP}") from None


DEVICES: tuple[Device, ...] = (
    Device("h100-80gb", "NVIDIA H100 80GB", 80 * GB, 85_017_853_952, int(3.35 * TB),
           989 * TB, "pending"),
)
