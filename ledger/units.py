"""Byte units: the only module that holds conversion factors. Binary GiB = 2**30; decimal GB only
where a vendor states it."""

import re
from decimal import Decimal, InvalidOperation

from .errors import SpecError

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_FACTORS = {
    "b": 1, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
    "kb": KB, "mb": MB, "gb": GB, "tb": TB,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
SIZE_HELP = "a size like 40GiB, 40 GiB, 80GB, 512MiB or a plain byte count"


def unit_hint(text: str) -> str:
    """'80G' -> '; did you mean 80GiB (2^30) or 80GB (10^9)?': a bare K/M/G/T says neither."""
    match = _SIZE.match(str(text))
    letter = match.group(2).upper() if match else ""
    if letter not in ("K", "M", "G", "T"):
        return ""
    power = "KMGT".index(letter) + 1
    number = match.group(1)
    return (f"; did you mean {number}{letter}iB (2^{10 * power}) or {number}{letter}B "
            f"(10^{3 * power})?")


def parse_size(text: str, field: str = "size") -> int:
    """'40GiB' -> 42949672960. Binary suffixes are 2**k, decimal ones 10**k; result in bytes."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match and _SIZE.match(str(text).strip().removeprefix("-")):  # '-5GiB'
        raise SpecError(field, text, f"not negative: {SIZE_HELP}")
    if not match or unit not in _FACTORS and unit != "":
        raise SpecError(field, text, f"expected {SIZE_HELP}{unit_hint(text)}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only digits
        raise SpecError(field, text, f"expected {SIZE_HELP}") from exc
    if unit == "" and number != number.to_integral_value():
        raise SpecError(field, text, f"a plain byte count must be whole; otherwise {SIZE_HELP}")
    return int(number * _FACTORS[unit or "b"])


def decimal_size_note(text: str) -> str:
    """'40GB' -> what it was read as (10^9 bytes, shown in GiB) and how to write 2^30; '' for
    a binary size, a byte count or a name. A GPU sold as '80GB' holds 80 GiB."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else ""
    if unit not in ("kb", "mb", "gb", "tb"):
        return ""
    size = parse_size(text)
    binary = f"{match.group(1)}{match.group(2)[0].upper()}iB"
    return (f"device {text!r} is decimal: {size:,} B = {size / GiB:,.2f} GiB (2^30); a GPU "
            f"sold as '80GB' holds 80 GiB: write {binary} for 2^30 bytes, or a catalog name")


def parse_size_flag(text: str, field: str, share: bool = False) -> int:
    """parse_size for a size a person types: '10' alone is refused (it would be 10 bytes, never
    what was meant) unless it is 0 or at least 1 MiB; the error offers '10GiB' (or '10%')."""
    size = parse_size(text, field)
    match = _SIZE.match(str(text))
    if 0 < size < MiB and not match.group(2):
        number = match.group(1)
        offer = f"{number}% (of the device) or {number}GiB" if share else \
            f"{number}GiB or {number}GB"
        raise SpecError(field, text, f"a size without a unit would be {size:,} bytes; give "
                        f"a unit: {offer} (0 and byte counts from 1 MiB up are taken as bytes)")
    return size


def parse_fraction_or_size(text: str, total_bytes: int, field: str) -> tuple[int, float | None]:
    """'10%' -> (10% of total, 0.10); '4GiB' -> (bytes, None); '10' is refused (see
    parse_size_flag)."""
    raw = str(text).strip()
    if raw.endswith("%"):
        try:
            pct = Decimal(raw[:-1].strip())
        except InvalidOperation as exc:
            raise SpecError(field, text, "expected a percentage like 10% or " + SIZE_HELP) from exc
        if not pct.is_finite() or not 0 <= pct < 100:
            raise SpecError(field, text, "a percentage must be at least 0% and below 100%")
        return int(total_bytes * pct / 100), float(pct / 100)
    try:
        size = parse_size(raw, field)
    except SpecError:
        raise SpecError(field, text, "expected a share of the device like 10% or "
                        + SIZE_HELP + unit_hint(raw)) from None
    return parse_size_flag(raw, field, share=True) if size else 0, None


def plural(count: int, noun: str) -> str:
    """'1 request', '39 requests', '1 GPU': every count-and-noun the program prints."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def gib(num_bytes: int) -> float:
    """Bytes -> GiB (2**30), for display only."""
    return num_bytes / GiB


def fmt_gib(num_bytes: int) -> str:
    """Two decimals with the unit named: '13.04 GiB'."""
    return f"{num_bytes / GiB:,.2f} GiB"


def fmt_bytes(num_bytes: int) -> str:
    """The most readable binary unit, labelled: '128 KiB', '0.50 GiB'."""
    for factor, label in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if abs(num_bytes) >= factor:
            value = num_bytes / factor
            return f"{value:,.0f} {label}" if value == int(value) else f"{value:,.2f} {label}"
    return f"{num_bytes:,} B"
