"""GPU prices per hour: servecap's default table, replaced per device by --gpu-price."""

from servecap.ledger.errors import SpecError

from .space import device_name

# Default USD per GPU-hour: round on-demand cloud list prices (2025) for one GPU, a labelled
# default only; real quotes differ by provider, region and commitment; pass --gpu-price.
DEFAULT_USD_PER_GPU_HOUR = {
    "a100-40gb": 1.30, "a100-80gb": 1.80, "h100-80gb": 3.00, "h200-141gb": 3.80,
    "l4-24gb": 0.80, "a10g-24gb": 1.00, "l40s-48gb": 1.50, "mi300x-192gb": 2.50,
    "rtx-4090-24gb": 0.70,
}
DEFAULT_SOURCE = "servecap default table (round 2025 on-demand list prices; pass --gpu-price)"


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """['h200=3.5'] -> {'h200-141gb': 3.5}; repeatable or comma-separated."""
    out = {}
    for item in (p for text in items or () for p in text.split(",") if p.strip()):
        name, sep, value = item.partition("=")
        try:
            price = float(value) if sep else -1.0
        except ValueError:
            price = -1.0
        if not 0 < price < 1e6:
            raise SpecError("--gpu-price", item, "DEVICE=USD_PER_GPU_HOUR, e.g. h200=3.5")
        out[device_name(name)] = price
    return out


def price_table(devices: tuple[str, ...], given: dict[str, float]) -> dict[str, dict]:
    """Each searched device's price and where it came from."""
    extra = sorted(set(given) - set(devices))
    if extra:
        raise SpecError("--gpu-price", extra[0], "a device that is searched (--devices)")
    table = {}
    for dev in devices:
        if dev in given:
            table[dev] = {"usd_per_gpu_hour": given[dev], "source": "--gpu-price"}
        elif dev in DEFAULT_USD_PER_GPU_HOUR:
            table[dev] = {"usd_per_gpu_hour": DEFAULT_USD_PER_GPU_HOUR[dev],
                          "source": DEFAULT_SOURCE}
        else:
            raise SpecError("--gpu-price", None, f"no default price for {dev}; give "
                            f"--gpu-price {dev}=USD")
    return table
